// Package proc is what the runtime knows of its process before and beside
// MPI: the program's name for messages, whether the launcher made this
// process the first rank (its rank variable is there before MPI starts),
// and warnings about environment variables it ignores. It takes the
// process's arguments and environment and gives strings and booleans.
package proc
