package localhub

import "testing"

func TestParentPID(t *testing.T) {
	for _, c := range []struct {
		stat string
		want int
	}{
		{"1234 (etcd) S 1 1234 1234 0 -1", 1},
		{"99 (kube-apiserver) S 4242 99 99 0", 4242},
		{"7 (odd (name) x) R 12 7 7", 12},
		{"garbage", 0},
	} {
		if got := parentPID(c.stat); got != c.want {
			t.Errorf("parentPID(%q) = %d, want %d", c.stat, got, c.want)
		}
	}
}

func TestHubProcessRecognised(t *testing.T) {
	if !isHubBinary("etcd") || isHubBinary("etcdctl") || !isHubBinary("kube-controller-manager") {
		t.Error("hub binaries misrecognised")
	}
	if !mentionsHubDir("kube-apiserver\x00--cert-dir=/tmp/localhub-apiserver-123") || mentionsHubDir("etcd\x00--data-dir=/var/lib/etcd") ||
		!mentionsHubDir("etcd\x00--data-dir=/tmp/localhub-etcd-705082638") {
		t.Error("hub directories misrecognised")
	}
	if binaryOf("/cache/bin/etcd\x00--data-dir=/tmp/x") != "etcd" || binaryOf("kube-apiserver") != "kube-apiserver" {
		t.Error("a command line's program misread")
	}
}
