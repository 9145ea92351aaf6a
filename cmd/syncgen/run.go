package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "build a plan and run it under mpirun",
		ArgsUsage: "FILE.sync [-- PROGRAM FLAGS]",
		Description: `run builds the plan like 'syncgen build' and starts it under mpirun with
the flags this machine needs: --allow-run-as-root when running as root,
--oversubscribe when there are more ranks than cores, and --bind-to none so
that each rank's Go runtime can use more than one core. Everything after
"--" goes to the program itself. Your OMPI_*, NCCL_* and CUDA_* variables
are passed through untouched.

With --restarts N a failed job (a crashed or killed rank, a timeout) is
launched again, at most N times, from the newest checkpoint of its plan that
this job committed, else from the checkpoint your own --resume took at the
first launch, else from step 0 (--resume since:TIME[,else:DIR|auto], TIME
being when run began), and without the --fault flags, which rehearse one
failure; each restart says why and from where. A job that cannot run as it
was started (status 2: a bad flag, a plan that cannot run on this many
ranks, a --resume that finds no checkpoint) is not launched again.
When a job fails and its ranks wrote flight records (the program's
--flight-dir, default flightrec), run merges them as 'syncgen flightrec'
does: which rank is missing from which collective. SIGINT and SIGTERM are
passed on to mpirun, which stops the ranks, and run then exits with 128 +
the signal; so does a launcher that dies of a signal. Should run itself be killed outright,
mpirun is sent SIGTERM (on Linux), so the job does not run on alone.

Examples:
   syncgen run -np 4 examples/resnet50.sync
   syncgen run -np 4 --restarts 2 model.sync -- --checkpoint-every 50
   syncgen run examples/hello.sync -np 2 -- --steps 50 --backend cpu --trace hello.json
   syncgen run --hosts node1:8,node2:8 examples/resnet50.sync
   syncgen run --hostfile hosts -np 16 examples/resnet50.sync

With --hosts (Open MPI's --host syntax, NAME:SLOTS,...) or --hostfile
(Open MPI's format, "NAME slots=N" a line) the ranks go to those hosts:
-np defaults to their slots, and more ranks than slots need
--oversubscribe. docs/hosts.md says how to run on a cluster and under
Slurm (srun --mpi=pmix).`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "np", Value: 2, Usage: "number of ranks"},
			&cli.StringFlag{Name: "mpirun", Value: "mpirun", Usage: "the MPI launcher `PATH`"},
			&cli.StringFlag{Name: "o", Usage: "write the program to `PATH` (default ./NAME_sync; into PATH/NAME_sync when PATH is a directory)"},
			&cli.BoolFlag{Name: "oversubscribe", Usage: "run more than " + strconv.Itoa(maxRanksPerCore) + " ranks a core (refused otherwise, as a likely typo)"},
			&cli.StringFlag{Name: "hosts", Usage: "run on these hosts, Open MPI's --host syntax: `NAME:SLOTS,...` (-np defaults to the slots)"},
			&cli.StringFlag{Name: "hostfile", Usage: "run on the hosts of Open MPI's hostfile `FILE` (NAME slots=N a line; -np defaults to the slots)"},
			&cli.IntFlag{Name: "restarts", Usage: "when the job fails, run it again at most `N` times, from the newest checkpoint of its plan this job committed, else from your --resume's, else from step 0, like torchrun's --max-restarts"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 {
				return cli.Exit("run: no .sync file given; usage: syncgen run [-np N] FILE.sync [-- PROGRAM FLAGS]", 2)
			}
			progArgs, err := programArgs(c.Args().Tail())
			if err != nil {
				return cli.Exit(err.Error(), 2)
			}
			hostFlags, slots, err := hostsFlags(c.String("hosts"), c.String("hostfile"), c.IsSet("hosts"), c.IsSet("hostfile"))
			if err != nil {
				return cli.Exit(err.Error(), 2)
			}
			// Every flag is checked before the plan is built.
			restarts := c.Int("restarts")
			if restarts < 0 {
				return cli.Exit(fmt.Sprintf("run: --restarts %d: want 0 or more", restarts), 2)
			}
			np := c.Int("np")
			if hostFlags != nil && !c.IsSet("np") {
				np = slots
			}
			if np < 1 {
				return cli.Exit(fmt.Sprintf("run: -np %d: need at least one rank", np), 2)
			}
			if hostFlags != nil && np > slots && !c.Bool("oversubscribe") {
				return cli.Exit(fmt.Sprintf("run: -np %d is more ranks than the hosts' %d slots; give the hosts more slots, or pass --oversubscribe to insist", np, slots), 2)
			}
			// Across hosts the slots say what each host takes.
			if hostFlags == nil {
				if err := checkRanksPerCore("run", "-np", np, c.Bool("oversubscribe")); err != nil {
					return err
				}
			}
			launcher, err := exec.LookPath(c.String("mpirun"))
			if err != nil {
				if c.IsSet("mpirun") {
					// The user named the launcher: the path is what to fix.
					return cli.Exit(fmt.Sprintf("run: --mpirun %s: %v; check the path, or leave --mpirun out to use mpirun from PATH", c.String("mpirun"), unwrapExecError(err)), 1)
				}
				return cli.Exit(fmt.Sprintf("run: %s not found: install Open MPI (Debian/Ubuntu: apt-get install openmpi-bin libopenmpi-dev) or pass --mpirun PATH", c.String("mpirun")), 1)
			}
			res, err := buildPlan(c, c.Args().First(), c.String("o"), false)
			if err != nil {
				return err
			}
			prog, err := filepath.Abs(res.Output)
			if err != nil {
				return cli.Exit(fmt.Sprintf("run: %v", err), 1)
			}
			began := time.Now() // a checkpoint committed since is this job's
			for attempt := 0; ; attempt++ {
				args := mpirunFlags(launcher, np, hostFlags, c.Bool("oversubscribe"))
				args = append(args, prog)
				args = append(args, progArgs...)
				fmt.Fprintf(c.App.ErrWriter, "+ %s\n", shellJoin(append([]string{launcher}, args...)))
				started := time.Now()
				code, stopped, err := launch(c, launcher, args)
				if err != nil {
					return cli.Exit(fmt.Sprintf("run: %v", err), 1)
				}
				switch {
				case code != 0 && stopped != 0:
					// The user stopped the job: every rank was cut short
					// mid-step, so the flight records blame no one. The
					// status is the signal's, as a shell gives a program
					// that a signal ends: mpirun's own (1) would read as
					// a failed rank.
					fmt.Fprintf(c.App.ErrWriter, "syncgen run: the job was stopped on your signal (%s; mpirun exited %d)\n", signalName(stopped), code)
					code = 128 + int(stopped)
				case code != 0:
					explainFailure(c, progArgs, started)
				}
				// A job that cannot run as started (status 2: a usage
				// error, a plan or --resume the ranks all refuse) fails
				// the same way every time; a signal to
				// syncgen run itself is the user's wish to stop.
				if code == 0 || attempt >= restarts || code == 2 || stopped != 0 {
					if code == 0 {
						return nil
					}
					// Say why --restarts did not act, where it was given.
					switch {
					case restarts == 0 || stopped != 0:
					case code == 2:
						fmt.Fprintf(c.App.ErrWriter, "syncgen run: not restarted: the job cannot run as it was started (exit 2; the program says why above), and would fail the same way again\n")
					default:
						fmt.Fprintf(c.App.ErrWriter, "syncgen run: the job failed (exit %d), and no restart is left (--restarts %d)\n", code, restarts)
					}
					return cli.Exit("", code)
				}
				progArgs = restartArgs(c, progArgs, code, attempt+1, restarts, began)
			}
		},
	}
}

// explainFailure merges the flight records that the ranks of a failed
// job wrote (the program's --flight-dir, default flightrec), so that the
// user sees which rank is missing from which collective without asking.
func explainFailure(c *cli.Context, progArgs []string, since time.Time) {
	dir := "flightrec"
	for i, a := range progArgs {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "flight-dir" && strings.HasPrefix(a, "-") {
			if !hasValue && i+1 < len(progArgs) {
				value = progArgs[i+1]
			}
			dir = value
		}
	}
	all, _, err := readFlightRecords(dir)
	if err != nil {
		return
	}
	// Only this launch's: the directory keeps older jobs' records, and a
	// rank killed before it wrote would be shown by its last job's.
	recs, _ := newestJob(all, since)
	if len(recs) == 0 {
		return
	}
	fmt.Fprintf(c.App.ErrWriter, "syncgen run: the ranks' flight records (%s) say:\n", dir)
	mergeFlightRecords(c.App.ErrWriter, recs)
}

// launch runs the launcher and waits for it, passing SIGINT and SIGTERM on
// to it (mpirun then stops the ranks) rather than leaving it and the ranks
// running without a parent; killed outright, syncgen run has the kernel
// send mpirun SIGTERM. It returns the exit status (128 + the signal
// when the launcher died of one), and the signal that syncgen run was
// sent, if any (0: none).
func launch(c *cli.Context, launcher string, args []string) (code int, stopped syscall.Signal, err error) {
	cmd := exec.Command(launcher, args...)
	cmd.Stdin = os.Stdin
	cmd.Stdout = c.App.Writer
	cmd.Stderr = c.App.ErrWriter
	// Should syncgen run die without passing a signal on, mpirun hears of
	// it from the kernel (endWithParent), through the thread that starts it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	endWithParent(cmd)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			stopped = sig.(syscall.Signal)
			cmd.Process.Signal(sig)
		case err := <-done:
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return 128 + int(ws.Signal()), stopped, nil
				}
				return exit.ExitCode(), stopped, nil
			}
			return 0, stopped, err
		}
	}
}

// signalName names the signals that launch passes on, as kill -l does.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// restartArgs says why the job is restarted and returns the program's
// flags for the next attempt: the --fault flags dropped (each rehearses
// one failure), and any --resume VALUE of the user's replaced by --resume
// since:TIME,else:VALUE (plain since:TIME without one), TIME being when
// the first launch began (began). The program then resumes from the newest
// checkpoint of its plan that this job committed, in its checkpoint
// directory (its --checkpoint-dir, else the plan's `checkpoint ... to
// DIR`, else checkpoints: the rule of its own --resume auto, which it
// alone knows); when there is none, from the checkpoint that VALUE took
// at the first launch (a directory, or auto among the checkpoints
// committed before TIME), and from step 0 only when the user gave no
// --resume. A checkpoint of another plan, or one committed after TIME by
// another job, is never taken. The program says which.
func restartArgs(c *cli.Context, progArgs []string, code, attempt, restarts int, began time.Time) []string {
	var kept []string
	resume := ""
	for i := 0; i < len(progArgs); i++ {
		a := progArgs[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		// A --fault rehearses one failure: the restarted job runs without it.
		if strings.HasPrefix(a, "-") && (name == "resume" || name == "fault") {
			if !hasValue && i+1 < len(progArgs) {
				i++ // its value
				value = progArgs[i]
			}
			if name == "resume" {
				resume = value
			}
			continue
		}
		kept = append(kept, a)
	}
	since := "since:" + began.UTC().Format(time.RFC3339Nano)
	from := "or from the start if none"
	if resume != "" {
		// A restart's own flags given again name the first launch's.
		if _, first, ok := strings.Cut(resume, ",else:"); ok && strings.HasPrefix(resume, "since:") {
			resume = first
		}
		if !strings.HasPrefix(resume, "since:") {
			since += ",else:" + resume
			from = "or else from what your --resume " + resume + " took"
		}
	}
	fmt.Fprintf(c.App.ErrWriter, "syncgen run: the job failed (exit %d); restart %d of %d, from the newest checkpoint that this job committed, %s (the program says which)\n",
		code, attempt, restarts, from)
	return append(kept, "--resume", since)
}

// unwrapExecError drops exec.LookPath's repetition of the name from its
// error ("exec: \"x\": executable file not found in $PATH").
func unwrapExecError(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		err = ee.Err
	}
	return unwrapPathError(err)
}

// programArgs returns the arguments for the program from those that follow
// the plan's file: everything after "--". The flag parser keeps a "--" that
// comes after the file among the arguments; passed on, it would make the
// program take its flags for positional arguments. Anything else after the
// file is a mistake.
func programArgs(tail []string) ([]string, error) {
	if len(tail) == 0 {
		return nil, nil
	}
	if tail[0] != "--" {
		return nil, fmt.Errorf("run: unexpected argument %q after the plan's file: give one .sync file, and the program's flags after --, e.g. syncgen run -np 2 model.sync -- --steps 50", tail[0])
	}
	return tail[1:], nil
}

// shellJoin joins a command line for display so that it can be pasted
// into a POSIX shell: arguments that are empty or hold anything but
// characters the shell never treats specially are put in single quotes.
// Paths with spaces and program flags such as --trace 'a b.json' are
// common enough that an unquoted echo would mislead.
func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// shellQuote quotes one argument for a POSIX shell when it needs it. A
// single quote inside ends the quoted part, is written escaped with a
// backslash, and a new quoted part starts after it.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=+,@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// mpirunFlags returns the launcher flags for np ranks: on this machine,
// or on the hosts that hostFlags (--host or --hostfile) name, whose slots
// say how many ranks each takes (so oversubscription is the user's call).
func mpirunFlags(launcher string, np int, hostFlags []string, oversubscribe bool) []string {
	flags := append([]string{"-np", strconv.Itoa(np)}, hostFlags...)
	if !isOpenMPI(launcher) {
		return flags
	}
	if os.Geteuid() == 0 {
		flags = append(flags, "--allow-run-as-root")
	}
	if (hostFlags == nil && np > runtime.NumCPU()) || (hostFlags != nil && oversubscribe) {
		flags = append(flags, "--oversubscribe")
	}
	return append(flags, "--bind-to", "none")
}

// isOpenMPI reports whether the launcher is Open MPI's, whose flags we add.
func isOpenMPI(launcher string) bool {
	out, _ := exec.Command(launcher, "--version").CombinedOutput()
	return strings.Contains(string(out), "Open MPI")
}
