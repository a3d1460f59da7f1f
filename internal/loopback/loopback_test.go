package loopback

import "testing"

func TestIs(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.1.2.3": true, "[::1]:9443": true, "::1": true, "localhost:8080": true,
		"localhost": true, ":8080": false, "": false, "0.0.0.0:8080": false, "[::]:8080": false,
		"10.0.0.1:8080": false, "example.com:443": false, "localhost.example.com": false, "[::ffff:127.0.0.1]:1": true,
	} {
		if got := Is(addr); got != want {
			t.Errorf("Is(%q) = %v, want %v", addr, got, want)
		}
	}
}
