package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestParseHosts checks --hosts' slots and its errors: what Open MPI's
// --host would refuse inside mpirun is refused here, naming the host.
func TestParseHosts(t *testing.T) {
	for list, want := range map[string][]hostSlots{
		"a:2,b:2,c":           {{"a", 2}, {"b", 2}, {"c", 1}},
		"localhost:1, vm:1":   {{"localhost", 1}, {"vm", 1}},
		" a : 2 ,b":           {{"a", 2}, {"b", 1}},
		"10.0.0.1:2,node-2.x": {{"10.0.0.1", 2}, {"node-2.x", 1}},
		"a:1,a:1":             {{"a", 1}, {"a", 1}}, // Open MPI adds them up
	} {
		got, err := parseHosts(list)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseHosts(%q) = %v, %v; want %v", list, got, err, want)
		}
	}
	for bad, msg := range map[string]string{
		"":          "no hosts",
		"  ":        "no hosts",
		"a:0":       `slots "0"`,
		"a:x":       `slots "x"`,
		"a:2,,b":    "item 2 is empty",
		"a b:2":     `host "a b"`,
		"-x:1":      `host "-x"`,
		"a_b:2":     `host "a_b": '_'`,
		"root@a:2":  "takes no user",
		"a:2,b+c:1": `host "b+c"`,
		"node[1-2]": `host "node[1-2]": a Slurm host list, which Open MPI does not expand: list its hosts (scontrol show hostnames "node[1-2]")`,
	} {
		_, err := parseHosts(bad)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("parseHosts(%q): error %v, want one with %q", bad, err, msg)
		}
	}
}

// TestHostsList checks that mpirun gets the list without the spaces it
// refuses.
func TestHostsList(t *testing.T) {
	flags, slots, err := hostsFlags("localhost:1, vm:1", "", true, false)
	if want := []string{"--host", "localhost:1,vm:1"}; err != nil || slots != 2 || !reflect.DeepEqual(flags, want) {
		t.Errorf("hostsFlags = %q, %d, %v; want %q, 2", flags, slots, err, want)
	}
}

// TestHostsFlags checks the choice between --hosts and --hostfile, an
// empty value, and that errors name the file.
func TestHostsFlags(t *testing.T) {
	dir := t.TempDir()
	lf, crlf := filepath.Join(dir, "lf"), filepath.Join(dir, "crlf")
	bare, userBare := filepath.Join(dir, "bare"), filepath.Join(dir, "user-bare")
	os.WriteFile(lf, []byte("a slots=2\nb slots=2\n"), 0o644)
	os.WriteFile(crlf, []byte("a slots=2\r\nb slots=2 max_slots=4\r\n"), 0o644)
	os.WriteFile(bare, []byte("a\nb\nc slots=0\n"), 0o644)
	os.WriteFile(userBare, []byte("u@a\nb slots=1\n"), 0o644)
	bom, userBOM := filepath.Join(dir, "bom"), filepath.Join(dir, "user-bom")
	os.WriteFile(bom, []byte("\ufeffa slots=2\nb slots=1\n"), 0o644)
	os.WriteFile(userBOM, []byte("\ufeffu@a slots=2\n"), 0o644)
	for _, c := range []struct {
		list, file       string
		listSet, fileSet bool
		flags            []string
		slots            int
		err              string
	}{
		{flags: nil},
		{file: lf, fileSet: true, flags: []string{"--hostfile", lf}, slots: 4},
		{file: crlf, fileSet: true, flags: []string{"--host", "a:2,b:2"}, slots: 4},
		// Open MPI would give a and b as many slots as they have cores,
		// and put both ranks of -np 2 on a.
		{file: bare, fileSet: true, flags: []string{"--host", "a:1,b:1"}, slots: 2},
		{file: userBare, fileSet: true, err: `host "u@a" has no slots=N: Open MPI would give it as many slots as it has cores, where syncgen run counts one; --host NAME:SLOTS, which syncgen run would pass instead, takes no USER@ (host "u@a"): give every host slots=N`},
		// A byte-order mark would be part of a's name to Open MPI.
		{file: bom, fileSet: true, flags: []string{"--host", "a:2,b:1"}, slots: 3},
		{file: userBOM, fileSet: true, err: `the file starts with a byte-order mark (bytes EF BB BF), which Open MPI would read as part of the first host's name; --host NAME:SLOTS, which syncgen run would pass instead, takes no USER@ (host "u@a"): save the file without its byte-order mark`},
		{listSet: true, err: "--hosts \"\": no hosts"},
		{fileSet: true, err: "--hostfile \"\""},
		{file: "/nonexistent", fileSet: true, err: "--hostfile /nonexistent: no such file"},
		{list: "a", file: lf, listSet: true, fileSet: true, err: "both given"},
	} {
		flags, slots, err := hostsFlags(c.list, c.file, c.listSet, c.fileSet)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("hostsFlags(%+v): error %v, want one with %q", c, err, c.err)
			}
			continue
		}
		if err != nil || slots != c.slots || !reflect.DeepEqual(flags, c.flags) {
			t.Errorf("hostsFlags(%+v) = %q, %d, %v; want %q, %d", c, flags, slots, err, c.flags, c.slots)
		}
	}
}

// TestReadHostfile checks a hostfile with comments, both slot keys, CRLF
// and USER@HOST, and that what Open MPI refuses inside mpirun is refused
// here with the line. The forms are those Open MPI 4.1's mpirun takes
// (spaces around '=', cpu and count for slots, "//" and "/* */"
// comments, slots=0, a host on several lines without slots) with the
// slots it gives them, but for a host on one line without slots, which
// it gives as many slots as it has cores: that one is counted one and
// the file is passed as --host (convert).
func TestReadHostfile(t *testing.T) {
	for _, c := range []struct {
		file    string
		want    []hostSlots
		convert string
	}{
		{"# two nodes\nnode1 slots=8 max_slots=16\n\n10.0.0.2 # no slots: one\n", []hostSlots{{"node1", 8}, {"10.0.0.2", 1}}, `host "10.0.0.2" has no slots=N`},
		{"localhost slots=2\r\nb slots=1\r\n", []hostSlots{{"localhost", 2}, {"b", 1}}, "CRLF"},
		{"root@node1 slots=2\n", []hostSlots{{"root@node1", 2}}, ""},
		{"a slots=2 max-slots=2\n", []hostSlots{{"a", 2}}, ""},
		{"a slots = 2\nb\tcpu= 3 // c\nc count =1\n", []hostSlots{{"a", 2}, {"b", 3}, {"c", 1}}, ""},
		{"a max_slots=4\nb slots_max=2 slots=1\n", []hostSlots{{"a", 4}, {"b", 1}}, ""},
		{"a slots=0\nb slots=2\n", []hostSlots{{"a", 0}, {"b", 2}}, ""},
		{"a\na\nb\nb\na\n", []hostSlots{{"a", 3}, {"b", 2}}, ""}, // Slurm's form
		{"a slots=1\na\n", []hostSlots{{"a", 2}}, ""},
		{"/* head */ a slots=1\n/* b slots=1\n*/ c slots=2 /* d */\n", []hostSlots{{"a", 1}, {"c", 2}}, ""},
		{"a slots=2\nb\n", []hostSlots{{"a", 2}, {"b", 1}}, `host "b" has no slots=N`},
	} {
		got, convert, err := readHostfile(strings.NewReader(c.file), "hosts")
		if err != nil || !reflect.DeepEqual(got, c.want) || (c.convert == "") != (convert == "") || !strings.Contains(convert, c.convert) {
			t.Errorf("readHostfile(%q) = %v, %q, %v; want %v, %q", c.file, got, convert, err, c.want, c.convert)
		}
	}
	for bad, msg := range map[string]string{
		"node1 slots=-1\n":                       "hosts:1: slots=-1: want a number from 0 to 4096",
		"node1 slots=+2\n":                       "hosts:1: slots=+2",
		"a\nnode1 cpus=2\n":                      `hosts:2: "cpus=2": want slots=N`,
		"a SLOTS=2\n":                            `hosts:1: "SLOTS=2"`,
		"a 10.0.0.1 slots=2\n":                   `hosts:1: "10.0.0.1": want slots=N or max_slots=N after the host's name, one host a line`,
		"a slots= \n":                            `hosts:1: "slots=": want slots=N`,
		"a slots==2\n":                           `hosts:1: "slots=": want slots=N`,
		"a slots\n":                              `hosts:1: "slots": want slots=N`,
		"slots=2\n":                              `hosts:1: "slots=2": want the host's name first`,
		"# nothing\n":                            "no hosts",
		"a slots=0\nb count=0\n":                 "no slots",
		"a\nno/de slots=1\n":                     "hosts:2:",
		"a_b slots=1\n":                          `hosts:1: host "a_b"`,
		"a:2\n":                                  `hosts:1: host "a:2": NAME:SLOTS is --hosts' form (and MPICH's); an Open MPI hostfile takes "a slots=2"`,
		"node[1-4] slots=2\n":                    `hosts:1: host "node[1-4]": a Slurm host list`,
		"localhost slots=1\nlocalhost slots=1\n": `hosts:2: host "localhost" is already on line 1`,
		"a\na slots=1\n":                         `hosts:2: host "a" is already on line 1`,
		"u@a slots=1\n# c\na slots=1\n":          `hosts:3: host "a" is already on line 1`,
		"a slots=4096\na\n":                      `hosts:2: host "a": more than 4096 slots`,
		"localhost slots=2 slots=3\n":            "hosts:1: slots given twice",
		"localhost slots=2 cpu=3\n":              "hosts:1: slots given twice",
		"a max_slots=2 max-slots=3\n":            "hosts:1: max_slots given twice",
		"localhost slots=2 max_slots=1\n":        "hosts:1: host \"localhost\": max_slots=1 is below slots=2",
		"@a slots=1\n":                           "hosts:1:",
		"a\n\nb@c@d slots=1\n":                   "hosts:3:",
	} {
		_, _, err := readHostfile(strings.NewReader(bad), "hosts")
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("readHostfile(%q): error %v, want one with %q", bad, err, msg)
		}
	}
}

// FuzzHostfile feeds readHostfile arbitrary files: it must return hosts
// with names that pass checkHostName (after a USER@) and slots in range,
// or an error; never panic.
func FuzzHostfile(f *testing.F) {
	f.Add("node1 slots=8\nnode2 slots=8 max_slots=8\n# c\n")
	f.Add("a\n\nb slots=x\n")
	f.Add("a slots = 2 // c\n/* x\n*/ b cpu=0\nb\n")
	f.Fuzz(func(t *testing.T, s string) {
		hosts, _, err := readHostfile(strings.NewReader(s), "f")
		if err != nil {
			return
		}
		for _, h := range hosts {
			name := h.Name
			if i := strings.LastIndex(name, "@"); i >= 0 {
				name = name[i+1:]
			}
			if checkHostName(name) != nil || h.Slots < 0 || h.Slots > maxSlots {
				t.Fatalf("readHostfile(%q) gave host %+v", s, h)
			}
		}
		if totalSlots(hosts) < 1 {
			t.Fatalf("readHostfile(%q) gave hosts without slots: %+v", s, hosts)
		}
	})
}

// TestClusterScriptChecksHosts checks that scripts/cluster.sh refuses a
// bad --hosts list before making anything (so without root), with exit
// status 1, not 77, which would make the tests skip.
func TestClusterScriptChecksHosts(t *testing.T) {
	for list, msg := range map[string]string{
		"a:0,b:2":                      "host a: slots '0'",
		"a:x,b:2":                      "host a: slots 'x'",
		"a:2,,b:2":                     "an empty item",
		"a:2:3":                        "slots '2:3'",
		"a_b:2":                        "host name 'a_b'",
		strings.Repeat("n", 64) + ":1": "longer than 63 characters",
	} {
		cmd := exec.Command("sh", "../../scripts/cluster.sh", "--hosts", list, "--", "true")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), msg) {
			t.Errorf("cluster.sh --hosts %s: %v, %q; want exit status 1 and %q", list, err, out, msg)
		}
	}
}
