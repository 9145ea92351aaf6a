package main

import (
	"bufio"
	"bytes"
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
// (a host without SLOTS takes one rank). Spaces around an item are
// dropped; hostsList gives the list as mpirun must get it.
func parseHosts(list string) ([]hostSlots, error) {
	if strings.TrimSpace(list) == "" {
		return nil, fmt.Errorf("--hosts %q: no hosts: want NAME[:SLOTS],..., e.g. --hosts a:2,b:2", list)
	}
	var hosts []hostSlots
	for i, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("--hosts %q: item %d is empty: want NAME[:SLOTS],..., e.g. --hosts a:2,b:2", list, i+1)
		}
		name, n, hasN := strings.Cut(item, ":")
		name = strings.TrimSpace(name)
		h := hostSlots{Name: name, Slots: 1}
		if hasN {
			s, err := strconv.Atoi(strings.TrimSpace(n))
			if err != nil || s < 1 || s > maxSlots {
				return nil, fmt.Errorf("--hosts %q: host %q: slots %q: want a number from 1 to %d, e.g. --hosts a:2,b:2", list, name, n, maxSlots)
			}
			h.Slots = s
		}
		if user, _, ok := strings.Cut(h.Name, "@"); ok {
			return nil, fmt.Errorf("--hosts %q: host %q: Open MPI's --host takes no user (%s@): put the host in a --hostfile, which does, or set the user in ~/.ssh/config", list, h.Name, user)
		}
		if err := checkHostName(h.Name); err != nil {
			return nil, fmt.Errorf("--hosts %q: %v", list, err)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// hostsList writes hosts in Open MPI's --host syntax, NAME:SLOTS,...
func hostsList(hosts []hostSlots) string {
	items := make([]string, len(hosts))
	for i, h := range hosts {
		items[i] = h.Name + ":" + strconv.Itoa(h.Slots)
	}
	return strings.Join(items, ",")
}

// readHostfile reads an Open MPI hostfile: one host a line, "[USER@]NAME
// [slots=N] [max_slots=N]", # comments and blank lines ignored (a host
// without slots takes one rank). Lines may end in CRLF; crlf reports
// whether one did (Open MPI's own parser refuses them). What Open MPI
// would refuse inside mpirun is refused here: a host on two lines, a key
// given twice, max_slots below slots. name is the file's name for errors,
// which give its line.
func readHostfile(r io.Reader, name string) (hosts []hostSlots, crlf bool, err error) {
	// bufio.ScanLines drops a line's CR, so look for them first.
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %v", name, err)
	}
	crlf = bytes.Contains(b, []byte("\r\n"))
	sc := bufio.NewScanner(bytes.NewReader(b))
	line := 0
	lineOf := map[string]int{}
	for sc.Scan() {
		line++
		text, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		h := hostSlots{Name: fields[0], Slots: 1}
		host := h.Name
		if user, rest, ok := strings.Cut(h.Name, "@"); ok {
			if err := checkUserName(user); err != nil {
				return nil, false, fmt.Errorf("%s:%d: host %q: %v", name, line, h.Name, err)
			}
			host = rest
		}
		if err := checkHostName(host); err != nil {
			return nil, false, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		if first, ok := lineOf[host]; ok {
			return nil, false, fmt.Errorf("%s:%d: host %q is already on line %d (Open MPI refuses a host on two lines): give it one line, with the sum of the slots", name, line, host, first)
		}
		lineOf[host] = line
		given := map[string]string{}
		maxS := 0
		for _, f := range fields[1:] {
			key, value, ok := strings.Cut(f, "=")
			n, err := strconv.Atoi(value)
			if !ok || (key != "slots" && key != "max_slots" && key != "max-slots") || err != nil || n < 1 || n > maxSlots {
				return nil, false, fmt.Errorf("%s:%d: %q: want slots=N or max_slots=N (N from 1 to %d) after the host's name, as Open MPI's hostfiles", name, line, f, maxSlots)
			}
			canon := strings.ReplaceAll(key, "-", "_")
			if prev, twice := given[canon]; twice {
				return nil, false, fmt.Errorf("%s:%d: %s given twice (%q, then %q): give it once", name, line, canon, prev, f)
			}
			given[canon] = f
			if canon == "slots" {
				h.Slots = n
			} else {
				maxS = n
			}
		}
		if maxS > 0 && maxS < h.Slots {
			return nil, false, fmt.Errorf("%s:%d: host %q: max_slots=%d is below slots=%d: raise max_slots or lower slots", name, line, h.Name, maxS, h.Slots)
		}
		hosts = append(hosts, h)
	}
	if err := sc.Err(); err != nil {
		return nil, false, fmt.Errorf("%s:%d: %v", name, line+1, err)
	}
	if len(hosts) == 0 {
		return nil, false, fmt.Errorf("%s: no hosts: want one a line, e.g. \"node1 slots=8\"", name)
	}
	return hosts, crlf, nil
}

// checkHostName accepts what Open MPI accepts as a node's name: letters,
// digits, '-' and '.' (IPv4 addresses included), not starting with '-'.
// Open MPI refuses any other character, '_' and spaces included ("illegal
// character in the following node name").
func checkHostName(name string) error {
	if name == "" {
		return fmt.Errorf("a host without a name")
	}
	if name[0] == '-' || len(name) > 253 {
		return fmt.Errorf("host %q: not a host name: want letters, digits, '-' and '.', not starting with '-'", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return fmt.Errorf("host %q: %q cannot be in a host name (Open MPI takes letters, digits, '-' and '.')", name, r)
		}
	}
	return nil
}

// checkUserName accepts the USER of a hostfile's USER@HOST: what ssh
// takes as a login name.
func checkUserName(user string) error {
	if user == "" || user[0] == '-' {
		return fmt.Errorf("want USER@HOST with a user name")
	}
	for _, r := range user {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return fmt.Errorf("%q cannot be in a user name", r)
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

// hostsFlags reads syncgen run's --hosts or --hostfile (at most one;
// listSet and fileSet say which were given, an empty value included) and
// returns the launcher's flags for them and the ranks the hosts take;
// none when neither is given. --hosts goes to Open MPI's --host as
// hostsList writes it, --hostfile to its --hostfile unchanged, except a
// file with CRLF line endings, which Open MPI cannot parse: its hosts go
// to --host.
func hostsFlags(list, file string, listSet, fileSet bool) (flags []string, slots int, err error) {
	var hosts []hostSlots
	switch {
	case listSet && fileSet:
		return nil, 0, fmt.Errorf("run: --hosts and --hostfile both given: give one")
	case listSet:
		if hosts, err = parseHosts(list); err != nil {
			return nil, 0, fmt.Errorf("run: %v", err)
		}
		flags = []string{"--host", hostsList(hosts)}
	case fileSet:
		if file == "" {
			return nil, 0, fmt.Errorf("run: --hostfile \"\": want a file of hosts, one a line (\"node1 slots=8\")")
		}
		f, openErr := os.Open(file)
		if openErr != nil {
			return nil, 0, fmt.Errorf("run: --hostfile %s: %v", file, unwrapPathError(openErr))
		}
		defer f.Close()
		var crlf bool
		if hosts, crlf, err = readHostfile(f, file); err != nil {
			return nil, 0, fmt.Errorf("run: %v", err)
		}
		flags = []string{"--hostfile", file}
		if crlf {
			for _, h := range hosts {
				if strings.Contains(h.Name, "@") {
					return nil, 0, fmt.Errorf("run: %s: host %q: the file has CRLF line endings, which Open MPI cannot read, and its --host takes no USER@: convert the file to LF endings (dos2unix %s)", file, h.Name, file)
				}
			}
			flags = []string{"--host", hostsList(hosts)}
		}
	default:
		return nil, 0, nil
	}
	return flags, totalSlots(hosts), nil
}
