// Package reserve is capo's reservation model: the entries and why they
// were made, the refs that name them, how addresses compare, the Store
// interface every reader and writer of reservations goes through, and the
// batcher that makes a node's teardowns one write. It does no I/O and
// imports nothing of Calico.
//
// How reservations are kept is calicostore's alone: the Calico
// IPReservation objects, their names and buckets, and the records'
// encoding live in pkg/reserve/calicostore and its internal layout
// package, which nothing else can reach. pkg/release plans over the
// entries; reservetest keeps them in memory as the datastores do.
package reserve
