resource "kubernetes_namespace_v1" "team" {
  metadata {
    name   = var.team
    labels = { "lockstep.dev/team" = var.team }
  }
}

# The engine pods and the admission webhook read the checkpoint with these credentials.
resource "kubernetes_secret_v1" "s3" {
  metadata {
    name      = "lockstep-s3"
    namespace = kubernetes_namespace_v1.team.metadata[0].name
  }
  data = {
    AWS_ACCESS_KEY_ID     = var.s3_access_key_id
    AWS_SECRET_ACCESS_KEY = var.s3_secret_access_key
  }
}

# A store only the team's namespace may use; each query's checkpoint goes to
# s3://<bucket>/<team>/<query>.
resource "kubernetes_manifest" "store" {
  manifest = {
    apiVersion = "streaming.lockstep.dev/v1"
    kind       = "CheckpointStore"
    metadata   = { name = "${var.team}-checkpoints" }
    spec = {
      s3                    = { endpoint = var.s3_endpoint, bucket = var.bucket, region = var.s3_region }
      credentialsSecretName = kubernetes_secret_v1.s3.metadata[0].name
      locationTemplate      = "{{namespace}}/{{name}}"
      allowedNamespaces     = [kubernetes_namespace_v1.team.metadata[0].name]
    }
  }
}
