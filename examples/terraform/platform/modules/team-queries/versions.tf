terraform {
  required_providers {
    lockstep = {
      source = "lockstep-dev/lockstep"
    }
  }
}
