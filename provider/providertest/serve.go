// Package providertest serves a Terraform provider inside a test binary, so that the real
// Terraform CLI can run against it without a plugin download (TF_REATTACH_PROVIDERS).
package providertest

import (
	"context"
	"os"
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

// QuietSDKLogs keeps the trace logs of a provider served in the test binary (Serve) out of
// the test output unless asked for (TF_LOG_SDK=trace): call it from TestMain.
func QuietSDKLogs() {
	for _, v := range []string{"TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK"} {
		if os.Getenv(v) == "" {
			os.Setenv(v, "off")
		}
	}
}
