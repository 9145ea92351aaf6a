package main

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseHosts checks --hosts' slots and its errors.
func TestParseHosts(t *testing.T) {
	got, err := parseHosts("a:2,b:2,c")
	want := []hostSlots{{"a", 2}, {"b", 2}, {"c", 1}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parseHosts(a:2,b:2,c) = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "a:0", "a:x", "a:2,,b", "a b:2", "-x:1"} {
		if _, err := parseHosts(bad); err == nil {
			t.Errorf("parseHosts(%q): no error", bad)
		}
	}
}

// TestReadHostfile checks a hostfile with comments and both slot keys,
// and that errors name the line.
func TestReadHostfile(t *testing.T) {
	got, err := readHostfile(strings.NewReader("# two nodes\nnode1 slots=8 max_slots=16\n\n10.0.0.2 # no slots: one\n"), "hosts")
	want := []hostSlots{{"node1", 8}, {"10.0.0.2", 1}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("readHostfile = %v, %v; want %v", got, err, want)
	}
	for bad, msg := range map[string]string{
		"node1 slots=0\n":    "hosts:1:",
		"a\nnode1 cpus=2\n":  "hosts:2:",
		"# nothing\n":        "no hosts",
		"a\nno/de slots=1\n": "hosts:2:",
	} {
		_, err := readHostfile(strings.NewReader(bad), "hosts")
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("readHostfile(%q): error %v, want one with %q", bad, err, msg)
		}
	}
}

// FuzzHostfile feeds readHostfile arbitrary files: it must return hosts
// with names that pass checkHostName and slots in range, or an error;
// never panic.
func FuzzHostfile(f *testing.F) {
	f.Add("node1 slots=8\nnode2 slots=8 max_slots=8\n# c\n")
	f.Add("a\n\nb slots=x\n")
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := readHostfile(strings.NewReader(s), "f")
		if err != nil {
			return
		}
		for _, h := range hosts {
			if checkHostName(h.Name) != nil || h.Slots < 1 || h.Slots > maxSlots {
				t.Fatalf("readHostfile(%q) gave host %+v", s, h)
			}
		}
	})
}
