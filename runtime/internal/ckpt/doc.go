// Package ckpt writes and reads checkpoints: one safetensors file per rank
// (its shard of the parameters and optimizer state, readable by any
// safetensors tool) and a metadata file that commits them.
//
// It takes named byte buffers with their dtypes and shapes, and the run's
// facts (plan, step, world size, scaler state, ownership of every bucket);
// it gives durable files and reads them back, checking every shard's size
// and sha256 against the metadata. A checkpoint is committed when its
// metadata file exists: every shard is written and fsynced first, then
// rank 0 writes the metadata under a temporary name, fsyncs it and renames
// it into place, so a crash at any point leaves either the previous
// checkpoint or a complete new one. It imports only package elem.
package ckpt
