package provider

// The provider's schema comes from the CRDs; keep the embedded copies current.
//go:generate cp ../config/crd/bases/streaming.lockstep.dev_streamingqueries.yaml ../config/crd/bases/streaming.lockstep.dev_checkpointstores.yaml crds/
