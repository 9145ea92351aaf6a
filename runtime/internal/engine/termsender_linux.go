//go:build linux && cgo

package engine

// Who sent this process SIGTERM. Go's os/signal does not say (it hands
// out the signal's number alone), so a C handler in front of Go's notes
// the sender's pid from the signal's siginfo and then calls Go's handler
// with the same arguments, as the kernel would have.

/*
#include <signal.h>
#include <string.h>

static struct sigaction sg_term_prev;
static volatile int sg_term_pid;

// sg_on_term keeps the pid of the first process that sent SIGTERM with
// kill (or sigqueue, tgkill: si_code <= 0), then runs the handler it
// replaced.
static void sg_on_term(int sig, siginfo_t *info, void *ctx) {
	if (info != NULL && info->si_code <= 0 && info->si_pid > 0) {
		int none = 0;
		__atomic_compare_exchange_n(&sg_term_pid, &none, (int)info->si_pid, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	}
	if (sg_term_prev.sa_flags & SA_SIGINFO) {
		sg_term_prev.sa_sigaction(sig, info, ctx);
	} else if (sg_term_prev.sa_handler != SIG_IGN && sg_term_prev.sa_handler != SIG_DFL) {
		sg_term_prev.sa_handler(sig);
	} else if (sg_term_prev.sa_handler == SIG_DFL) {
		sigaction(sig, &sg_term_prev, NULL);
		raise(sig);
	}
}

// sg_watch_term puts sg_on_term in front of the installed handler, with
// its flags and mask. SA_ONSTACK matters: Go requires it of every handler
// (a signal may arrive on a goroutine's small stack).
static int sg_watch_term(void) {
	struct sigaction sa;
	if (sigaction(SIGTERM, NULL, &sg_term_prev) != 0) {
		return -1;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = sg_on_term;
	sa.sa_mask = sg_term_prev.sa_mask;
	sa.sa_flags = (sg_term_prev.sa_flags & ~SA_RESETHAND) | SA_SIGINFO | SA_ONSTACK;
	return sigaction(SIGTERM, &sa, NULL);
}

static int sg_term_sender(void) {
	return __atomic_load_n(&sg_term_pid, __ATOMIC_SEQ_CST);
}
*/
import "C"

import "sync"

// watchTermSender starts noting who sends SIGTERM; call it after
// signal.Notify has installed Go's handler, which it calls in turn. Once
// is enough, and a second handler in front would note nothing new.
var watchTermSender = sync.OnceFunc(func() { C.sg_watch_term() })

// termSender is the pid of the process that sent this one SIGTERM, and
// false when none did with kill (or the signal came from the kernel).
func termSender() (int, bool) {
	pid := int(C.sg_term_sender())
	return pid, pid > 0
}
