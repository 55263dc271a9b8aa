package provider

// The provider's schema comes from the CRDs: keep the embedded copies current.
//go:generate cp ../config/crd/bases/streaming.lockstep.dev_streamingqueries.yaml ../config/crd/bases/streaming.lockstep.dev_checkpointstores.yaml crds/

// The provider's reference pages, docs/terraform, from the schema's descriptions, the
// examples in examples/terraform and the templates in docs/terraform-templates. Needs
// terraform on PATH (make generate puts the tool cache's there). TestDocsAreCurrent runs
// this same line.
//go:generate go run github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs@v0.25.0 generate --provider-dir ../cmd/terraform-provider-lockstep --provider-name lockstep --rendered-provider-name Lockstep --examples-dir ../../examples/terraform --website-source-dir ../../docs/terraform-templates --rendered-website-dir ../../docs/terraform
