package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
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

// slotKeys are the words Open MPI's hostfile reader takes for a host's
// slots, maxSlotKeys those it takes for its max_slots.
var (
	slotKeys    = []string{"slots", "cpu", "count"}
	maxSlotKeys = []string{"max_slots", "max-slots", "slots_max", "slots-max", "max_cpu", "max-cpu",
		"cpu_max", "cpu-max", "max_count", "max-count", "count_max", "count-max"}
)

// readHostfile reads an Open MPI hostfile as Open MPI 4 reads it: one
// host a line, "[USER@]NAME [slots=N] [max_slots=N]" (cpu and count are
// slots' other names, max-slots, slots_max and the like max_slots'; '='
// may have spaces around it), comments from '#' or "//" to the end of
// the line and between "/*" and "*/". slots=0 is a host that takes no
// rank. A host with max_slots alone has that many slots. A host on
// several lines takes one slot more for each line after the first that
// gives no slots (Slurm's form, one line a rank); a later line that gives
// slots, a key given twice on a line and max_slots below slots are
// refused, as Open MPI refuses them, naming the file (name) and line.
//
// convert is why mpirun must get the hosts as --host NAME:SLOTS rather
// than the file itself ("" when it can read the file): Open MPI cannot
// parse CRLF line endings, and it gives a host on one line without slots
// as many slots as the host has cores, where syncgen run counts one.
func readHostfile(r io.Reader, name string) (hosts []hostSlots, convert string, err error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v", name, err)
	}
	// A byte-order mark (what some Windows editors write first) would be
	// part of the first host's name to Open MPI: leave it out here, and
	// pass the hosts as --host.
	if rest, ok := bytes.CutPrefix(b, []byte("\ufeff")); ok {
		b, convert = rest, bomReason
	}
	if bytes.Contains(b, []byte("\r\n")) {
		convert = crlfReason
	}
	type seen struct {
		index, line, lines int
		bare               bool // the first line gave neither slots nor max_slots
	}
	byHost := map[string]*seen{}
	for _, seg := range hostfileLines(string(b)) {
		line := seg.line
		fields := strings.Fields(strings.ReplaceAll(seg.text, "=", " = "))
		if len(fields) == 0 {
			continue
		}
		h := hostSlots{Name: fields[0], Slots: 1}
		if h.Name == "=" || len(fields) > 1 && fields[1] == "=" {
			return nil, "", fmt.Errorf("%s:%d: %q: want the host's name first, then slots=N, e.g. \"node1 slots=8\"", name, line, strings.TrimSpace(seg.text))
		}
		host := h.Name
		if user, rest, ok := strings.Cut(h.Name, "@"); ok {
			if err := checkUserName(user); err != nil {
				return nil, "", fmt.Errorf("%s:%d: host %q: %v", name, line, h.Name, err)
			}
			host = rest
		}
		if n, slots, ok := strings.Cut(host, ":"); ok && n != "" && !strings.Contains(slots, ":") {
			return nil, "", fmt.Errorf("%s:%d: host %q: NAME:SLOTS is --hosts' form (and MPICH's); an Open MPI hostfile takes \"%s slots=%s\"", name, line, h.Name, n, slots)
		}
		if err := checkHostName(host); err != nil {
			return nil, "", fmt.Errorf("%s:%d: %v", name, line, err)
		}
		given := map[string]string{}
		slots, maxS := -1, 0
		for rest := fields[1:]; len(rest) > 0; rest = rest[3:] {
			if len(rest) < 3 || rest[1] != "=" || rest[2] == "=" {
				// Quote the word as written: a second host on the line
				// ("a b slots=2") is the word "b", not "bslots=".
				word := rest[0]
				if len(rest) > 1 && rest[1] == "=" {
					word += "="
				}
				return nil, "", fmt.Errorf("%s:%d: %q: want slots=N or max_slots=N after the host's name, one host a line, as Open MPI's hostfiles (cpu=N and count=N are slots too)", name, line, word)
			}
			key, value := rest[0], rest[2]
			canon := ""
			switch {
			case slices.Contains(slotKeys, key):
				canon = "slots"
			case slices.Contains(maxSlotKeys, key):
				canon = "max_slots"
			default:
				return nil, "", fmt.Errorf("%s:%d: %q: want slots=N or max_slots=N after the host's name, as Open MPI's hostfiles (cpu=N and count=N are slots too)", name, line, key+"="+value)
			}
			n, err := strconv.Atoi(value)
			low := 0
			if canon == "max_slots" {
				low = 1
			}
			if err != nil || strings.ContainsAny(value[:1], "+-") || n < low || n > maxSlots {
				return nil, "", fmt.Errorf("%s:%d: %s=%s: want a number from %d to %d", name, line, key, value, low, maxSlots)
			}
			if prev, twice := given[canon]; twice {
				return nil, "", fmt.Errorf("%s:%d: %s given twice (%q, then %q): give it once", name, line, canon, prev, key+"="+value)
			}
			given[canon] = key + "=" + value
			if canon == "slots" {
				slots = n
			} else {
				maxS = n
			}
		}
		if maxS > 0 && slots > maxS {
			return nil, "", fmt.Errorf("%s:%d: host %q: max_slots=%d is below slots=%d: raise max_slots or lower slots", name, line, h.Name, maxS, slots)
		}
		bare := slots < 0 && maxS == 0
		switch {
		case slots >= 0:
			h.Slots = slots
		case maxS > 0:
			h.Slots = maxS
		}
		if prev, ok := byHost[host]; ok {
			if !bare {
				return nil, "", fmt.Errorf("%s:%d: host %q is already on line %d: Open MPI takes a host on several lines only as one line a slot, without slots=N; give it one line, with the sum of the slots", name, line, host, prev.line)
			}
			if hosts[prev.index].Slots >= maxSlots {
				return nil, "", fmt.Errorf("%s:%d: host %q: more than %d slots", name, line, host, maxSlots)
			}
			hosts[prev.index].Slots++
			prev.lines++
			continue
		}
		byHost[host] = &seen{index: len(hosts), line: line, lines: 1, bare: bare}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, "", fmt.Errorf("%s: no hosts: want one a line, e.g. \"node1 slots=8\"", name)
	}
	if totalSlots(hosts) == 0 {
		return nil, "", fmt.Errorf("%s: no slots: every host has slots=0; give at least one host slots", name)
	}
	if convert == "" {
		for _, h := range hosts {
			host := h.Name[strings.Index(h.Name, "@")+1:]
			if s := byHost[host]; s.bare && s.lines == 1 {
				convert = fmt.Sprintf("host %q has no slots=N: Open MPI would give it as many slots as it has cores, where syncgen run counts one", h.Name)
				break
			}
		}
	}
	return hosts, convert, nil
}

// crlfReason and bomReason are readHostfile's reasons to convert a file
// with CRLF line endings, or one that starts with a byte-order mark.
const (
	crlfReason = "the file has CRLF line endings, which Open MPI cannot read"
	bomReason  = "the file starts with a byte-order mark (bytes EF BB BF), which Open MPI would read as part of the first host's name"
)

// hostfileLine is a line of a hostfile as Open MPI's reader sees it: the
// text between line ends, comments and the ends of block comments, and
// the number of the line it is on.
type hostfileLine struct {
	text string
	line int
}

// hostfileLines splits a hostfile into the lines Open MPI's reader takes
// hosts from: '#' and "//" end a line's text, and a "/* ... */" comment,
// which may span lines, ends the text before it and starts a new line
// after it.
func hostfileLines(s string) []hostfileLine {
	var out []hostfileLine
	inBlock := false
	for i, raw := range strings.Split(s, "\n") {
		rest := strings.TrimSuffix(raw, "\r")
		for {
			if inBlock {
				end := strings.Index(rest, "*/")
				if end < 0 {
					break
				}
				rest, inBlock = rest[end+2:], false
			}
			cut, block := len(rest), false
			for _, mark := range []string{"#", "//", "/*"} {
				if j := strings.Index(rest, mark); j >= 0 && j < cut {
					cut, block = j, mark == "/*"
				}
			}
			out = append(out, hostfileLine{rest[:cut], i + 1})
			if !block {
				break
			}
			rest, inBlock = rest[cut+2:], true
		}
	}
	return out
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
	if strings.ContainsAny(name, "[]") {
		return fmt.Errorf("host %q: a Slurm host list, which Open MPI does not expand: list its hosts (scontrol show hostnames %q)", name, name)
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
// file that Open MPI would read otherwise than readHostfile (CRLF line
// endings, a byte-order mark, a host without slots): its hosts go to --host, with the
// slots readHostfile counted.
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
		var convert string
		if hosts, convert, err = readHostfile(f, file); err != nil {
			return nil, 0, fmt.Errorf("run: %v", err)
		}
		flags = []string{"--hostfile", file}
		if convert != "" {
			var items []hostSlots
			for _, h := range hosts {
				if strings.Contains(h.Name, "@") {
					fix := "give every host slots=N"
					switch convert {
					case crlfReason:
						fix = "convert the file to LF endings (dos2unix " + file + ")"
					case bomReason:
						fix = "save the file without its byte-order mark (sed -i '1s/^\\xEF\\xBB\\xBF//' " + file + ")"
					}
					return nil, 0, fmt.Errorf("run: %s: %s; --host NAME:SLOTS, which syncgen run would pass instead, takes no USER@ (host %q): %s", file, convert, h.Name, fix)
				}
				// --host takes no host of 0 slots; it takes no rank either.
				if h.Slots > 0 {
					items = append(items, h)
				}
			}
			flags = []string{"--host", hostsList(items)}
		}
	default:
		return nil, 0, nil
	}
	return flags, totalSlots(hosts), nil
}
