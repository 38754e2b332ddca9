package capoctl

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/capo-net/capo/pkg/redact"
)

// bundleHelp says exactly what a bundle holds; docs/operations.md says
// the same.
const bundleHelp = `Write a support archive (tar.gz) of capo and of what capo reads of Calico:

  status.json                 capoctl status, as -o json gives it
  nodes/<node>/agent-metrics.txt
                              the agent's /metrics
  nodes/<node>/cni/<file>     the node's CNI configs (*.conflist, *.conf, *.json
                              in the agent's --cni-conf-dir), and
  nodes/<node>/journal.json   capo-ipam's journaled DELs: both read by running
                              "capo-agent node-info" in the agent's container
                              (pods/exec)
  logs/<pod>/<container>.log  the last --tail lines of capo's pods
  metrics/<pod>.txt           the controllers' /metrics
  kubernetes/nodes.yaml       every Node (opt-in annotations, conditions)
  kubernetes/<ns>/*.yaml      in --capo-namespace, capo's own objects only:
                              its pods, DaemonSets and Deployments (labelled
                              app.kubernetes.io/name=capo), its ConfigMaps
                              (so labelled, and capo-config, capo-release),
                              its Lease (--lease-name) and the Events about
                              these
  capo/reservations.yaml      capo's reservations
  calico/*.yaml               Calico's ClusterInformation, IPPools,
                              IPReservations and IPAM configuration
  errors.txt                  what could not be collected, and why

Nothing else of a shared namespace (kube-system) is read, and no Secret.
Every file has its secrets replaced by <redacted>: values of keys named like a
token, password, secret, credential or auth, key and certificate data given
inline (a file path is kept), and PEM blocks, JSON Web Tokens and bearer
credentials wherever they are. Journal records and Events still name pods
and addresses: look through the archive before you send it.`

func bundleCmd(a *app) *cobra.Command {
	var file, lease string
	var tail int64
	cmd := &cobra.Command{
		Use:   "bundle [-f FILE]",
		Short: "Write a support archive (tar.gz), secrets redacted",
		Long:  bundleHelp,
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the archive to write (default capo-bundle-<time>.tar.gz here)")
	cmd.Flags().Int64Var(&tail, "tail", 10000, "log lines per container")
	cmd.Flags().StringVar(&lease, "lease-name", defaultLease, "capo-controller's leader-election Lease, in --capo-namespace")
	cmd.RunE = a.runs(func(c *cli, _ *cobra.Command, _ []string) error {
		if file == "" {
			file = "capo-bundle-" + c.now.UTC().Format("20060102-150405") + ".tar.gz"
		}
		b := &bundle{files: map[string][]byte{}}
		collector{c}.gather(b, lease, tail)
		if err := b.write(file, c.now); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "wrote %s: %d files, %d things not collected (errors.txt), %d secrets redacted\n", file, len(b.files), len(b.errs), b.redacted)
		return nil
	})
	return cmd
}

// bundle is the archive's files by path, and what could not be collected.
// Everything added passes through redact.
type bundle struct {
	files    map[string][]byte
	errs     []string
	redacted int
}

func (b *bundle) failed(name string, err error) {
	out, _ := redact.Text([]byte(err.Error()))
	b.errs = append(b.errs, name+": "+string(out))
}

// text adds a text (logs, metrics), redacted.
func (b *bundle) text(name string, data []byte, err error) {
	if err != nil {
		b.failed(name, err)
		return
	}
	out, n := redact.Text(data)
	b.files[name], b.redacted = out, b.redacted+n
}

// json adds v as JSON, redacted.
func (b *bundle) json(name string, v any) {
	out, n, err := redact.Value(v)
	if err != nil {
		b.failed(name, err)
		return
	}
	b.files[name], b.redacted = append(out, '\n'), b.redacted+n
}

// yaml adds v as YAML, redacted.
func (b *bundle) yaml(name string, v any, err error) {
	if err != nil {
		b.failed(name, err)
		return
	}
	out, n, err := redact.Value(v)
	if err == nil {
		out, err = yaml.JSONToYAML(out)
	}
	if err != nil {
		b.failed(name, err)
		return
	}
	b.files[name], b.redacted = out, b.redacted+n
}

// conf adds a CNI config: JSON redacted as JSON, anything else withheld.
func (b *bundle) conf(name, data string) {
	out, n, err := redact.JSON([]byte(data))
	if err != nil {
		out = []byte("<withheld: " + err.Error() + ">\n")
	}
	b.files[name], b.redacted = out, b.redacted+n
}

// write writes the archive under one top directory, errors.txt last.
func (b *bundle) write(file string, now time.Time) error {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	top := strings.TrimSuffix(path.Base(file), ".tar.gz") + "/"
	names := make([]string, 0, len(b.files))
	for n := range b.files {
		names = append(names, n)
	}
	sort.Strings(names)
	sort.Strings(b.errs)
	b.files["errors.txt"] = []byte(strings.Join(b.errs, "\n") + "\n")
	names = append(names, "errors.txt")
	for _, n := range names {
		data := b.files[n]
		if err := tw.WriteHeader(&tar.Header{Name: top + n, Mode: 0o600, Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return f.Close()
}

// ReadBundle is what a bundle holds, file by file: for whoever reads one
// without unpacking it (support tooling, the tests).
func ReadBundle(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	tr, files := tar.NewReader(gz), map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", file, h.Name, err)
		}
		files[h.Name] = string(b)
	}
}
