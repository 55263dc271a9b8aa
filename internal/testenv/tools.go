package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ToolsDir is the folder holding the test tools' binaries: $LOCKSTEP_TOOLS/bin,
// default $HOME/.cache/lockstep/tools/bin.
func ToolsDir() string {
	root := os.Getenv("LOCKSTEP_TOOLS")
	if root == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		root = filepath.Join(home, ".cache", "lockstep", "tools")
	}
	return filepath.Join(root, "bin")
}

// Tool returns the path of a cached test tool, failing the test with the
// command that builds it when it is missing.
func Tool(t testing.TB, name string) string {
	t.Helper()
	path, err := LookupTool(name)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// LookupTool returns the path of a cached test tool, or a *MissingToolError.
func LookupTool(name string) (string, error) {
	path := filepath.Join(ToolsDir(), name)
	if _, err := os.Stat(path); err != nil {
		return "", &MissingToolError{Name: name, Path: path}
	}
	return path, nil
}

// MissingToolError reports a test tool that is not in the cache.
type MissingToolError struct {
	Name, Path string
}

func (e *MissingToolError) Error() string {
	return "test tool " + e.Name + " not found at " + e.Path +
		": run `make tools` (or `hack/tools.sh " + e.Name + "`) to build it"
}

// Output runs cmd and returns what it wrote to its standard output; when cmd fails, it fails
// the test with what cmd wrote to its standard error.
func Output(t testing.TB, cmd *exec.Cmd) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, stderr.String())
	}
	return out
}

// HelmHome returns the environment variables that give helm its cache, configuration and
// data in the folder home, away from the user's.
func HelmHome(home string) []string {
	return []string{"HELM_CACHE_HOME=" + home, "HELM_CONFIG_HOME=" + home, "HELM_DATA_HOME=" + home}
}
