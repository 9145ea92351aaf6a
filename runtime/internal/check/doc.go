// Package check is the runtime's exact checker. It keeps a model of what
// every tensor holds (the step whose fill pattern it last received and the
// collectives applied to its bucket since), chooses each tensor's fill
// pattern so that those collectives give results it can predict exactly
// (Patterns), and compares every element of a bucket on this rank with the
// model (CheckBucket).
//
// It takes the plan, the recorded program's statements as they run
// (Apply), the tensors' memory on a backend and the backend to read it, and
// gives per-bucket counts of wrong and unchecked elements with the first
// wrong one described.
package check
