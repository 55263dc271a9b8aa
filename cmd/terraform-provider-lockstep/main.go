// Command terraform-provider-lockstep is the Lockstep Terraform provider: Terraform starts it
// and talks to it over the plugin protocol, version 6. See package provider and
// docs/terraform/index.md.
//
// Run it with -debug to start it for a debugger; it prints the TF_REATTACH_PROVIDERS value
// that makes Terraform use it.
package main

import (
	"context"
	"flag"
	"log"
	"runtime/debug"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/lockstep-dev/lockstep/provider"
)

// Address is the provider's registry address, as `required_providers` names it.
const Address = "registry.terraform.io/lockstep-dev/lockstep"

// version is set at link time: -ldflags "-X main.version=v1.2.3".
var version = ""

func main() {
	debugMode := flag.Bool("debug", false, "start the provider for a debugger (delve) and print TF_REATTACH_PROVIDERS")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(buildVersion()), providerserver.ServeOpts{
		Address:         Address,
		Debug:           *debugMode,
		ProtocolVersion: 6,
	})
	if err != nil {
		log.Fatal(err)
	}
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
