package report

import "testing"

func TestParseNetDev(t *testing.T) {
	text := `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     500       5    0    0    0     0          0         0      500       5    0    0    0     0       0          0
  eth0: 1234567    1000    0    0    0     0          0         0  7654321     900    0    0    0     0       0          0
`
	tx, rx, err := parseNetDev(text, "eth0")
	if err != nil || tx != 7654321 || rx != 1234567 {
		t.Errorf("parseNetDev(eth0) = %d, %d, %v; want 7654321, 1234567", tx, rx, err)
	}
	if _, _, err := parseNetDev(text, "eth1"); err == nil {
		t.Error("parseNetDev(eth1): want an error naming the missing interface")
	}
	if _, _, err := parseNetDev("  eth0: 1 2 3\n", "eth0"); err == nil {
		t.Error("a short line: want an error")
	}
}
