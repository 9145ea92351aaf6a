// Package text renders what the runtime prints for people: sizes, counts,
// durations, table cells, rank lists, plurals, and the on/off words of its
// flags and environment variables. It takes plain values and gives strings;
// it knows nothing of plans or backends.
package text
