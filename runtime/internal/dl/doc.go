// Package dl opens shared libraries at run time with dlopen and resolves
// their symbols with dlsym.
//
// The CUDA and NCCL wrappers use it so that a syncgen program builds and
// starts on machines without a GPU, a CUDA toolkit or NCCL headers: the
// libraries are looked for only when the GPU backend is asked for, and a
// missing library or symbol becomes an error that names what was missing and
// where it was looked for, never a crash at load time.
//
// It takes library paths and symbol names and gives handles and function
// pointers, or errors that say what is missing.
package dl
