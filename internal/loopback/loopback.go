// Package loopback decides whether an address is reachable from this host only. Both products use it (as they use
// buildinfo) wherever a default may be relaxed on loopback alone: listen addresses, plaintext URLs that would carry
// credentials, and peers the capi-private proxy trusts.
package loopback

import "net"

// Is reports whether addr — a host or a host:port, as a listen address, a URL's host or a connection's remote
// address — names this host only: 127.0.0.0/8, ::1 or "localhost". An empty host (":8080") listens on every
// interface and is not loopback.
func Is(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
