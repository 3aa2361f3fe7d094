package main

import (
	"context"
	"fmt"

	"fngateway/core"
)

type azureParts struct {
	store    core.Store
	queue    core.Queue
	notifier core.Notifier
}

func openAzure(ctx context.Context, s *core.Settings) (*azureParts, error) {
	return nil, fmt.Errorf("azure: not wired yet")
}
