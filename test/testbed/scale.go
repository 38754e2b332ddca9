package testbed

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Cluster is a population of API objects for scale benchmarks: namespaces,
// and pods bound to nodes by spec.nodeName with no sandboxes behind them.
// Grow adds to it; Remove deletes it (no namespace controller runs in the
// bed, so Remove finalizes the namespaces itself).
type Cluster struct {
	kube       kubernetes.Interface // unthrottled: seeding is setup, not what is measured
	prefix     string
	namespaces []string
	pods       int
}

// NewCluster starts an empty population whose objects are named after prefix.
func (b *Bed) NewCluster(prefix string) (*Cluster, error) {
	cfg := *b.REST
	cfg.QPS, cfg.Burst = -1, 0
	kube, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{kube: kube, prefix: prefix}, nil
}

// Namespaces and Pods are the population's size.
func (c *Cluster) Namespaces() int { return len(c.namespaces) }
func (c *Cluster) Pods() int       { return c.pods }

// Grow adds namespaces up to namespaces and pods up to pods, the pods spread
// round-robin over the namespaces and over nodes node names (no Node objects).
func (c *Cluster) Grow(ctx context.Context, namespaces, pods, nodes int) error {
	have := len(c.namespaces)
	for i := have; i < namespaces; i++ {
		c.namespaces = append(c.namespaces, fmt.Sprintf("%s-ns-%d", c.prefix, i))
	}
	err := parallel(ctx, namespaces-have, func(ctx context.Context, k int) error {
		name := c.namespaces[have+k]
		if _, err := c.kube.CoreV1().Namespaces().Create(ctx, ScaleNamespace(name, have+k), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	from := c.pods
	err = parallel(ctx, pods-from, func(ctx context.Context, k int) error {
		i := from + k
		ns := c.namespaces[i%len(c.namespaces)]
		p, err := c.kube.CoreV1().Pods(ns).Create(ctx, ScalePod(ns, fmt.Sprintf("%s-pod-%d", c.prefix, i), fmt.Sprintf("%s-node-%d", c.prefix, i%nodes)), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("pod %s-pod-%d: %w", c.prefix, i, err)
		}
		ScalePodRunning(p, fmt.Sprintf("10.%d.%d.%d", 64+i>>16, byte(i>>8), byte(i)))
		if _, err := c.kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("pod %s status: %w", p.Name, err)
		}
		return nil
	})
	if err == nil {
		c.pods = max(c.pods, pods)
	}
	return err
}

// Remove deletes the population: pods at once (no kubelet would confirm a
// graceful delete), then each namespace, finalized first so it goes at once.
func (c *Cluster) Remove(ctx context.Context) error {
	zero := int64(0)
	return parallel(ctx, len(c.namespaces), func(ctx context.Context, i int) error {
		name := c.namespaces[i]
		err := c.kube.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("pods of %s: %w", name, err)
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := c.kube.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("finalizing %s: %w", name, err)
		}
		if err := c.kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s: %w", name, err)
		}
		return nil
	})
}

// seedWorkers is how many requests seeding keeps in flight: enough to keep
// the API server busy on two cores, few enough not to starve it.
const seedWorkers = 16

// parallel runs f(0..n-1) on seedWorkers goroutines and returns the first error.
func parallel(ctx context.Context, n int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range min(seedWorkers, max(n, 0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}
