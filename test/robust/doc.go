// Package robust is capo's robustness suite, in the manner of etcd's:
// seeded random traffic of what a cluster does to StatefulSet and plain
// pods on two nodes of the test bed (real etcd, kube-apiserver, Calico's
// plugins, capo's processes), faults injected as it runs (processes
// killed, failpoints in capo's critical sections, API errors, servers
// restarted, Calico's GC, the conflist rewritten, the datastore locked),
// and a checker that samples Calico's state while the run goes on and
// holds it, with the recorded history, to capo's invariants.
package robust
