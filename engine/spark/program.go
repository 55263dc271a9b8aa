package spark

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// ProgramCommand returns the command that runs a single-file Java program (java's source
// launcher) on the runner's Spark classpath, with a heap of heapBytes: a plain Spark job with
// no Lockstep code, as the tests use to write checkpoints Lockstep never wrote.
func (r Runner) ProgramCommand(javaFile string, heapBytes int64, args ...string) *exec.Cmd {
	cmdArgs := []string{"-Xmx" + strconv.FormatInt(max(heapBytes>>20, 128), 10) + "m"}
	cmdArgs = append(cmdArgs, javaOptions...)
	cmdArgs = append(cmdArgs, "--source", "17", "-cp", filepath.Join(r.Dir, "libs", "*"), javaFile)
	cmdArgs = append(cmdArgs, args...)
	cmd := exec.Command(r.Java, cmdArgs...)
	cmd.Env = os.Environ()
	return cmd
}
