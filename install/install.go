package install

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/capo-net/capo/pkg/wire"
)

// Options say where things are on the node, as this process sees them.
type Options struct {
	CNIBinDir    string         // the runtime's CNI_PATH, e.g. /host/opt/cni/bin
	CNIConfDir   string         // e.g. /host/etc/cni/net.d
	Source       string         // the capo-ipam binary to install
	HelperSource string         // capo-ipam-kube; "" means beside Source
	IPAMExtra    map[string]any // capo-ipam settings written beside the delegate
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

// binaries are what install puts in the CNI bin dir, in the order it puts
// them there: capo-ipam's helper before capo-ipam, which runs it.
func (o Options) binaries() []struct{ src, dst string } {
	helper := o.HelperSource
	if helper == "" {
		helper = filepath.Join(filepath.Dir(o.Source), wire.KubeHelper)
	}
	return []struct{ src, dst string }{
		{helper, filepath.Join(o.CNIBinDir, wire.KubeHelper)},
		{o.Source, filepath.Join(o.CNIBinDir, binaryName)},
	}
}

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
	for _, b := range o.binaries() {
		changed, err := copyBinary(b.src, b.dst)
		if err != nil {
			return r, fmt.Errorf("installing %s: %w", filepath.Base(b.dst), err)
		}
		r.BinaryChanged = r.BinaryChanged || changed
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
	bins := o.binaries()
	for i := len(bins) - 1; i >= 0; i-- {
		if _, err := os.Stat(bins[i].dst); err == nil {
			r.BinaryRemoved = true
		}
		if err := removeIfExists(bins[i].dst); err != nil {
			return r, err
		}
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
	rep.BinaryExists, rep.BinaryFresh = true, true
	bins := o.binaries()
	for i := len(bins) - 1; i >= 0; i-- { // capo-ipam's problem first: the worse one
		b := bins[i]
		have, err := fileSum(b.dst)
		if err != nil {
			rep.BinaryExists, rep.BinaryFresh = false, false
			if rep.Installed && rep.Problem == "" {
				rep.Problem = "the config calls capo-ipam but " + b.dst + " is missing: " + missingMeans(b.dst) + "; run install"
			}
			continue
		}
		want, err := fileSum(b.src)
		if err != nil || string(have) != string(want) {
			rep.BinaryFresh = false
			if rep.Installed && rep.Problem == "" {
				rep.Problem = b.dst + " differs from this release's; run install"
			}
		}
	}
	return rep, nil
}

// missingMeans says what a missing binary breaks.
func missingMeans(path string) string {
	if filepath.Base(path) == binaryName {
		return "every pod ADD on this node fails"
	}
	return "a pod ADD that needs Calico's pool annotations fails while the node's agent is away"
}
