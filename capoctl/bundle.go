package capoctl

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func bundleCmd(a *app) *cobra.Command {
	var file, lease string
	var tail int64
	cmd := &cobra.Command{
		Use:   "bundle [-f FILE]",
		Short: "Write a support archive (tar.gz)",
		Long: `Write a support archive (tar.gz): capo's status; logs and metrics of capo's
pods; capo's and Calico's objects (reservations, IPPools, IPReservations,
ClusterInformation, IPAM config, nodes, capo's pods, DaemonSets, Deployments,
ConfigMaps, Leases and Events); and each node's CNI configs and journal, read
through its agent. No Secret is read. What cannot be read is listed in
errors.txt; the archive is written all the same.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the archive to write (default capo-bundle-<time>.tar.gz here)")
	cmd.Flags().Int64Var(&tail, "tail", 10000, "log lines per container")
	cmd.Flags().StringVar(&lease, "lease-name", defaultLease, "capo-controller's leader-election Lease, in --capo-namespace")
	cmd.RunE = a.runs(func(c *cli, _ *cobra.Command, _ []string) error {
		if file == "" {
			file = "capo-bundle-" + c.now.UTC().Format("20060102-150405") + ".tar.gz"
		}
		b := &bundle{files: map[string][]byte{}}
		c.gather(b, lease, tail)
		if err := b.write(file, c.now); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "wrote %s: %d files, %d things not collected (errors.txt)\n", file, len(b.files), len(b.errs))
		return nil
	})
	return cmd
}

// bundle is the archive's files by path, and what could not be collected.
type bundle struct {
	files map[string][]byte
	errs  []string
}

func (b *bundle) add(name string, data []byte, err error) {
	if err != nil {
		b.errs = append(b.errs, name+": "+err.Error())
		return
	}
	b.files[name] = data
}

func (b *bundle) yaml(name string, v any, err error) {
	if err == nil {
		var data []byte
		data, err = yaml.Marshal(v)
		b.add(name, data, err)
		return
	}
	b.add(name, nil, err)
}

// gather reads everything the bundle carries; nothing stops it.
func (c *cli) gather(b *bundle, lease string, tail int64) {
	r := c.collect(lease)
	st, err := json.MarshalIndent(r, "", "  ")
	b.add("status.json", st, err)
	for _, n := range r.Nodes {
		dir := "nodes/" + n.Node + "/"
		if n.metrics != nil {
			b.add(dir+"agent-metrics.txt", n.metrics, nil)
		}
		if n.info == nil {
			continue
		}
		for name, conf := range n.info.Conflists {
			b.add(dir+"cni/"+path.Base(name), []byte(conf), nil)
		}
		j, err := json.MarshalIndent(n.info.Journal, "", "  ")
		b.add(dir+"journal.json", j, err)
	}
	ns, ctx := c.capoNS, c.ctx
	core, apps := c.kube.CoreV1(), c.kube.AppsV1()
	nodes, err := core.Nodes().List(ctx, metav1.ListOptions{})
	b.yaml("kubernetes/nodes.yaml", nodes, err)
	pods, err := core.Pods(ns).List(ctx, metav1.ListOptions{})
	b.yaml("kubernetes/"+ns+"/pods.yaml", pods, err)
	ds, err := apps.DaemonSets(ns).List(ctx, metav1.ListOptions{})
	b.yaml("kubernetes/"+ns+"/daemonsets.yaml", ds, err)
	dep, err := apps.Deployments(ns).List(ctx, metav1.ListOptions{})
	b.yaml("kubernetes/"+ns+"/deployments.yaml", dep, err)
	cms, err := core.ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	b.yaml("kubernetes/"+ns+"/configmaps.yaml", cms, err)
	leases, err := c.kube.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	b.yaml("kubernetes/"+ns+"/leases.yaml", leases, err)
	evs, err := core.Events(ns).List(ctx, metav1.ListOptions{})
	b.yaml("kubernetes/"+ns+"/events.yaml", evs, err)
	calicoPods, err := core.Pods("").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app in (calico-node,calico-kube-controllers,calico-typha)"})
	b.yaml("kubernetes/calico-pods.yaml", calicoPods, err)
	if pods != nil {
		c.gatherPods(b, pods.Items, tail)
	}
	rows, err := c.rows(filter{})
	b.yaml("capo/reservations.yaml", rows, err)
	if c.calico != nil {
		objs, errs := c.calico.Objects(ctx)
		for name, v := range objs {
			b.yaml("calico/"+name, v, nil)
		}
		for name, err := range errs {
			b.add("calico/"+name, nil, err)
		}
	}
}

// gatherPods adds the logs of capo's pods, and the controllers' metrics
// (the agents' are under nodes/).
func (c *cli) gatherPods(b *bundle, pods []corev1.Pod, tail int64) {
	for i := range pods {
		p := &pods[i]
		for _, ct := range p.Spec.Containers {
			logs, err := c.kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ct.Name, TailLines: &tail}).DoRaw(c.ctx)
			b.add("logs/"+p.Name+"/"+ct.Name+".log", logs, err)
		}
		if p.Labels["app.kubernetes.io/component"] == "controller" {
			m, err := c.fromPod(p, "/metrics")
			b.add("metrics/"+p.Name+".txt", m, err)
		}
	}
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
