// Package chaos is the SP's chaos suite (`make chaos`; not part of `make test`). It runs two SP replicas as real
// processes against the local hub (kube-apiserver, etcd, the controller manager's garbage collector), real NATS
// JetStream and the HyperShift simulator, records every status event with a JetStream consumer, and injects
// faults: SIGKILLs of the leader and the follower, a NATS outage, hub faults through Toxiproxy and the HTTP fault
// proxy, a kube-apiserver restart, and sustained load. It prints a table of figures and fails on any lost status
// or orphaned hub object. The tests are behind the `chaos` build tag.
package chaos
