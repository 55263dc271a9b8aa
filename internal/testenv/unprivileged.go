package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// unprivilegedUser is the account PostgreSQL runs as when the tests run as root.
const unprivilegedUser = "nobody"

// asUnprivileged makes cmd run as an unprivileged user when we are root
// (PostgreSQL refuses root), giving that user the folder dir.
func asUnprivileged(cmd *exec.Cmd, dir string) *exec.Cmd {
	if os.Geteuid() != 0 {
		return cmd
	}
	u, err := user.Lookup(unprivilegedUser)
	if err != nil {
		return cmd // initdb will then say why it cannot run
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	_ = filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			_ = os.Lchown(p, uid, gid)
		}
		return nil
	})
	_ = os.Chmod(filepath.Dir(dir), 0o755) // let the user reach its folder
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	cmd.Env = append(os.Environ(), "HOME="+dir)
	return cmd
}

// startProcessAs is startProcess for a server that must not run as root.
func startProcessAs(name, bin string, args []string, logPath, dir string) (*process, error) {
	if os.Geteuid() != 0 {
		return startProcess(name, bin, args, nil, logPath)
	}
	cmd := asUnprivileged(exec.Command(bin, args...), dir)
	if cmd.SysProcAttr.Credential == nil {
		return nil, fmt.Errorf("%s cannot run as root and user %q does not exist", name, unprivilegedUser)
	}
	return startCmd(name, cmd, logPath)
}
