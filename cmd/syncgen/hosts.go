package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// hostSlots is one host of syncgen run's --hosts or --hostfile and how
// many ranks it takes.
type hostSlots struct {
	Name  string
	Slots int
}

// maxSlots bounds one host's slots: more is a typo, not a machine.
const maxSlots = 4096

// parseHosts reads --hosts in Open MPI's --host syntax: NAME[:SLOTS],...
// (a host without SLOTS takes one rank).
func parseHosts(list string) ([]hostSlots, error) {
	var hosts []hostSlots
	for _, item := range strings.Split(list, ",") {
		name, n, hasN := strings.Cut(strings.TrimSpace(item), ":")
		h := hostSlots{Name: name, Slots: 1}
		if hasN {
			s, err := strconv.Atoi(n)
			if err != nil || s < 1 || s > maxSlots {
				return nil, fmt.Errorf("--hosts %s: host %q: slots %q: want a number from 1 to %d, e.g. --hosts a:2,b:2", list, name, n, maxSlots)
			}
			h.Slots = s
		}
		if err := checkHostName(h.Name); err != nil {
			return nil, fmt.Errorf("--hosts %s: %v", list, err)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// readHostfile reads an Open MPI hostfile: one host a line, "NAME
// [slots=N] [max_slots=N]", # comments and blank lines ignored (a host
// without slots takes one rank). name is the file's name for errors,
// which give its line.
func readHostfile(r io.Reader, name string) ([]hostSlots, error) {
	var hosts []hostSlots
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		h := hostSlots{Name: fields[0], Slots: 1}
		if err := checkHostName(h.Name); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		for _, f := range fields[1:] {
			key, value, ok := strings.Cut(f, "=")
			n, err := strconv.Atoi(value)
			if !ok || (key != "slots" && key != "max_slots" && key != "max-slots") || err != nil || n < 1 || n > maxSlots {
				return nil, fmt.Errorf("%s:%d: %q: want slots=N or max_slots=N (N from 1 to %d) after the host's name, as Open MPI's hostfiles", name, line, f, maxSlots)
			}
			if key == "slots" {
				h.Slots = n
			}
		}
		hosts = append(hosts, h)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", name, line+1, err)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%s: no hosts: want one a line, e.g. \"node1 slots=8\"", name)
	}
	return hosts, nil
}

// checkHostName accepts what can name a host: letters, digits, '-', '.'
// and '_' (IPv4 addresses included), not starting with '-'.
func checkHostName(name string) error {
	if name == "" {
		return fmt.Errorf("a host without a name")
	}
	if name[0] == '-' || len(name) > 253 {
		return fmt.Errorf("host %q: not a host name", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return fmt.Errorf("host %q: %q cannot be in a host name", name, r)
		}
	}
	return nil
}

// totalSlots is the ranks the hosts take.
func totalSlots(hosts []hostSlots) int {
	n := 0
	for _, h := range hosts {
		n += h.Slots
	}
	return n
}

// hostsFlags reads syncgen run's --hosts or --hostfile (at most one) and
// returns the launcher's flags for them (Open MPI's own --host and
// --hostfile, passed through) and the ranks the hosts take; none when
// neither is given.
func hostsFlags(list, file string) (flags []string, slots int, err error) {
	var hosts []hostSlots
	switch {
	case list != "" && file != "":
		return nil, 0, fmt.Errorf("run: --hosts and --hostfile both given: give one")
	case list != "":
		hosts, err = parseHosts(list)
		flags = []string{"--host", list}
	case file != "":
		f, openErr := os.Open(file)
		if openErr != nil {
			return nil, 0, fmt.Errorf("run: --hostfile: %v", unwrapPathError(openErr))
		}
		defer f.Close()
		hosts, err = readHostfile(f, file)
		flags = []string{"--hostfile", file}
	default:
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("run: %v", err)
	}
	return flags, totalSlots(hosts), nil
}
