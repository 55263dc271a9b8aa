output "namespace" {
  value = kubernetes_namespace_v1.team.metadata[0].name
}

output "checkpoint_store" {
  value = kubernetes_manifest.store.manifest.metadata.name
}
