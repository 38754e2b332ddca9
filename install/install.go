package install

import (
	"fmt"
	"os"
	"path/filepath"
)

// Options say where things are on the node, as this process sees them.
type Options struct {
	CNIBinDir  string         // the runtime's CNI_PATH, e.g. /host/opt/cni/bin
	CNIConfDir string         // e.g. /host/etc/cni/net.d
	Source     string         // the capo-ipam binary to install
	IPAMExtra  map[string]any // capo-ipam settings written beside the delegate
}

// Result says what a call changed.
type Result struct {
	Config         string // the runtime's config file
	BinaryChanged  bool
	ConfigChanged  bool
	BinaryRemoved  bool
	AlreadyCorrect bool
}

const binaryName = "capo-ipam"

// Install puts the binary in place before the config names it, so the
// runtime never calls a capo-ipam that is not there.
func Install(o Options) (*Result, error) {
	conf, err := RuntimeConfig(o.CNIConfDir)
	if err != nil {
		return nil, err
	}
	// Refuse before touching anything.
	data, err := os.ReadFile(conf)
	if err != nil {
		return nil, err
	}
	if _, err := Inspect(data); err != nil {
		return nil, fmt.Errorf("%s: %w", conf, err)
	}
	r := &Result{Config: conf}
	if r.BinaryChanged, err = copyBinary(o.Source, filepath.Join(o.CNIBinDir, binaryName)); err != nil {
		return r, fmt.Errorf("installing %s: %w", binaryName, err)
	}
	if r.ConfigChanged, err = editFile(conf, func(b []byte) ([]byte, error) { return Patch(b, o.IPAMExtra) }); err != nil {
		return r, err
	}
	r.AlreadyCorrect = !r.BinaryChanged && !r.ConfigChanged
	return r, nil
}

// Uninstall restores the config before removing the binary, so the runtime
// never calls a capo-ipam that is gone.
func Uninstall(o Options) (*Result, error) {
	conf, err := RuntimeConfig(o.CNIConfDir)
	if err != nil {
		return nil, err
	}
	r := &Result{Config: conf}
	if r.ConfigChanged, err = editFile(conf, Unpatch); err != nil {
		return r, err
	}
	bin := filepath.Join(o.CNIBinDir, binaryName)
	if _, err := os.Stat(bin); err == nil {
		r.BinaryRemoved = true
	}
	if err := removeIfExists(bin); err != nil {
		return r, err
	}
	r.AlreadyCorrect = !r.ConfigChanged && !r.BinaryRemoved
	return r, nil
}

// Report is what Check found.
type Report struct {
	Config       string
	IPAMType     string
	Installed    bool // the config calls capo-ipam
	BinaryExists bool
	BinaryFresh  bool // the installed binary is the source's
	Problem      string
}

// Check reads without changing anything.
func Check(o Options) (*Report, error) {
	conf, err := RuntimeConfig(o.CNIConfDir)
	if err != nil {
		return nil, err
	}
	rep := &Report{Config: conf}
	data, err := os.ReadFile(conf)
	if err != nil {
		return nil, err
	}
	st, err := Inspect(data)
	if err != nil {
		rep.Problem = err.Error()
		return rep, nil
	}
	rep.IPAMType, rep.Installed = st.IPAMType, st.Installed
	bin := filepath.Join(o.CNIBinDir, binaryName)
	if have, err := fileSum(bin); err == nil {
		rep.BinaryExists = true
		want, err := fileSum(o.Source)
		rep.BinaryFresh = err == nil && string(have) == string(want)
	}
	switch {
	case rep.Installed && !rep.BinaryExists:
		rep.Problem = "the config calls capo-ipam but " + bin + " is missing: every pod ADD on this node fails; run install"
	case rep.Installed && !rep.BinaryFresh:
		rep.Problem = bin + " differs from this release's capo-ipam; run install"
	}
	return rep, nil
}
