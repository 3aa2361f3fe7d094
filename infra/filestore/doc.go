// Package filestore is the embedded async store, used when
// AsyncStore=file:<dir>: continuation records, result blobs, the
// continuation queue and lifecycle notifications, all kept as plain files
// under one directory, plus the handler that serves blobs back through the
// gateway's own signed URLs (/_gateway/blobs/<key>?se=…&sig=…).
//
// A *Store implements async.Store, async.Queue and async.Notifier. Its methods
// may be called by multiple goroutines simultaneously. Every write goes to a
// temporary file that is synced and then renamed into place, so a process
// killed mid-write leaves the old object or the new one, never a torn one,
// and a read made while the object is replaced returns one or the other.
//
// Rules of use: one Store per directory at a time. Locks and the queue's
// index live in the process, so two processes (or two Stores in one
// process) sharing a directory may lose conditional writes and deliver a
// message twice at once. The one exception is OpenBeside, for the
// dead-letter command: it only reads records, adds new message files (which
// a running gateway's Receive adopts) and reads or deletes quarantine/.
//
// Layout of the directory:
//
//	signing.key          HMAC key of the signed blob URLs (32 bytes, 0600)
//	objects/<key>        records and blobs: a short header, then the bytes
//	queue/<id>.msg       queued messages: a short header, then the body
//	quarantine/          dead letters: queue files set aside whole (undecodable)
//	topics/<topic>.jsonl lifecycle notifications, one JSON document a line
package filestore
