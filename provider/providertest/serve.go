// Package providertest serves a Terraform provider inside a test binary, so that the real
// Terraform CLI can run against it without a plugin download (TF_REATTACH_PROVIDERS).
package providertest

import (
	"context"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"
)

// Serve serves the provider server at address (registry.terraform.io/owner/name) until the
// test ends, and returns its entry of TF_REATTACH_PROVIDERS.
func Serve(t testing.TB, address string, server func() tfprotov6.ProviderServer) map[string]any {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reattach := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	go func() {
		_ = tf6server.Serve(address, server,
			tf6server.WithDebug(ctx, reattach, closed),
			tf6server.WithGoPluginLogger(hclog.NewNullLogger()),
			tf6server.WithoutLogStderrOverride())
	}()
	cfg := <-reattach
	t.Cleanup(func() { cancel(); <-closed })
	return map[string]any{
		"Protocol": string(cfg.Protocol), "ProtocolVersion": 6, "Pid": cfg.Pid, "Test": true,
		"Addr": map[string]string{"Network": cfg.Addr.Network(), "String": cfg.Addr.String()},
	}
}
