package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one child process of the benchmark: the upstream, the floor or a modelgate.
type proc struct {
	name string
	cmd  *exec.Cmd
	url  string
	// A modelgate's config file and log, and what startModelgate put in its config: reload
	// writes a new config with the same address and data directory.
	cfgPath, logPath, listen, data string
}

// startReporting starts a command that prints its base URL as the first line of stdout.
func startReporting(name, logDir, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	logf, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("%s printed no address: %w", name, err)
	}
	return &proc{name: name, cmd: cmd, url: strings.TrimSpace(line)}, nil
}

// startModelgate runs the real binary with a generated config on a free loopback port and
// waits for /healthz. env is added to the benchmark's own environment.
func startModelgate(name, logDir, bin, configYAML string, env ...string) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, url: "http://127.0.0.1:" + strconv.Itoa(port), cfgPath: filepath.Join(logDir, name+".yaml"),
		logPath: filepath.Join(logDir, name+".log"), listen: "127.0.0.1:" + strconv.Itoa(port), data: filepath.Join(logDir, name+"-data")}
	if err := p.writeConfig(configYAML); err != nil {
		return nil, err
	}
	logf, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config", p.cfgPath)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.cmd = cmd
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(p.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.stop()
	return nil, fmt.Errorf("%s did not become healthy; see %s", name, filepath.Join(logDir, name+".log"))
}

// writeConfig writes configYAML as p's config file, with p's address and data directory.
func (p *proc) writeConfig(configYAML string) error {
	cfg := strings.ReplaceAll(configYAML, "${LISTEN}", p.listen)
	cfg = strings.ReplaceAll(cfg, "${DATA}", p.data)
	return os.WriteFile(p.cfgPath, []byte(cfg), 0o600)
}

// reload gives a running modelgate a new config: it rewrites the file, sends SIGHUP and
// waits for the log line that says the reload was applied (the log is read from where it
// ended before the signal, so a phase's access log is not read again). A rejected reload is
// an error: the process would go on serving the old config.
func (p *proc) reload(configYAML string) error {
	if err := p.writeConfig(configYAML); err != nil {
		return err
	}
	st, err := os.Stat(p.logPath)
	if err != nil {
		return err
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return fmt.Errorf("reload %s: %w", p.name, err)
	}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		tail, err := readFrom(p.logPath, st.Size())
		if err != nil {
			return err
		}
		switch {
		case strings.Contains(tail, "config reload rejected"):
			return fmt.Errorf("%s rejected its new config; see %s", p.name, p.logPath)
		case strings.Contains(tail, "config reloaded"):
			return nil
		}
	}
	return fmt.Errorf("%s did not reload within 15 s; see %s", p.name, p.logPath)
}

// readFrom is the text of the file at path from offset on.
func readFrom(path string, offset int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, offset, 1<<20))
	return string(b), err
}

func (p *proc) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat; 100 on Linux.
const clockTicks = 100

// cpuTime is the user+system CPU the process has used so far, from its own accounting.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields are counted after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	// After ')': field 3 (state) is f[0], so utime (14) is f[11] and stime (15) f[12].
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad /proc stat numbers")
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// rssBytes is the process's resident set size now.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}
