package testenv

import "testing"

// Terraform returns the path of the Terraform CLI that `make tools` linked or
// built into the tool cache, for TF_ACC_TERRAFORM_PATH.
func Terraform(t testing.TB) string {
	t.Helper()
	return Tool(t, "terraform")
}
