package azure_test

import (
	"testing"

	"fngateway/infra/azure"
	"fngateway/internal/emulators"
)

// newAccount returns an Account on az's development account.
func newAccount(tb testing.TB, az *emulators.Azurite) *azure.Account {
	tb.Helper()
	acct, err := azure.NewAccount(azure.Config{ConnectionString: az.ConnectionString()})
	if err != nil {
		tb.Fatalf("NewAccount: %v", err)
	}
	return acct
}
