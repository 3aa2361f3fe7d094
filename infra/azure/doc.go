// Package azure implements core/async's ports on Azure Storage: a Store on
// Blob storage, a Queue and a Notifier on Queue storage.
//
// Everything starts from an Account, made by NewAccount from a Config that
// names the storage account one of two ways, as the Azure Functions host does
// for AzureWebJobsStorage: a connection string (shared-key authorization; SAS
// URLs signed with the account key), or identity-based service URIs with a
// token credential (user-delegation SAS URLs). The package never reads the
// environment; the edge passes the values in.
//
// Containers and queues are created on first use when missing. Azure errors
// are mapped to async.ErrNotFound and async.ErrConflict where the ports say so;
// other errors are returned wrapped, with a short prefix naming the operation.
//
// Requests are retried by the SDK's retry policy, set short by default (see
// Config.Retry), so an operation against an unreachable account fails in
// about a second rather than minutes; the caller's context deadline bounds
// every operation, a hung connection included.
package azure
