package config

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Holder is the config in force; readers call Get on every use, so a reload
// takes effect at once without a restart.
type Holder struct {
	v atomic.Pointer[Config]
	// loaded: the config in force is the operator's (a valid ConfigMap, or
	// none at all, which means the defaults), not merely the defaults this
	// process started with. An invalid ConfigMap at start leaves it false.
	loaded atomic.Bool
}

// NewHolder starts with c.
func NewHolder(c *Config) *Holder {
	h := &Holder{}
	h.v.Store(c)
	return h
}

// Get returns the config in force.
func (h *Holder) Get() *Config { return h.v.Load() }

// Loaded reports whether the config in force is the one the operator asked
// for. Until it is, nothing may be released on the strength of defaults.
func (h *Holder) Loaded() bool { return h.loaded.Load() }

// Set puts c in force as the operator's config.
func (h *Holder) Set(c *Config) {
	h.v.Store(c)
	h.loaded.Store(true)
}

// Watch keeps h in step with the ConfigMap namespace/name. An invalid
// config is reported and the last good one stays; a deleted ConfigMap
// means the defaults. onLoad gets nil or the error of every load.
func Watch(ctx context.Context, kube kubernetes.Interface, namespace, name string, h *Holder, onLoad func(error)) cache.InformerSynced {
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	inf := f.Core().V1().ConfigMaps().Informer()
	load := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return
		}
		c, err := fromConfigMap(cm)
		switch {
		case err != nil && !h.Loaded():
			slog.Error("config rejected at start: until it is fixed capo-controller releases nothing and capo-agent decides on the defaults", "configmap", namespace+"/"+name, "err", err)
		case err != nil:
			slog.Error("config rejected; the last good config stays in force", "configmap", namespace+"/"+name, "err", err)
		default:
			h.Set(c)
			slog.Info("config loaded", "configmap", namespace+"/"+name, "ipReserveTime", c.IPReserveTime,
				"ipReserveMaxCount", c.IPReserveMaxCount, "ipReleasePeriod", c.IPReleasePeriod, "selectors", len(c.Selectors), "returnAddress", c.ReturnAddress)
		}
		onLoad(err)
	}
	reg, _ := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    load,
		UpdateFunc: func(_, obj any) { load(obj) },
		DeleteFunc: func(any) {
			h.Set(Default())
			slog.Warn("config deleted; using the defaults", "configmap", namespace+"/"+name)
			onLoad(nil)
		},
	})
	go inf.Run(ctx.Done())
	go func() {
		// No ConfigMap at all is the operator's choice of the defaults.
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) && len(inf.GetStore().List()) == 0 {
			h.Set(h.Get())
			slog.Info("no config ConfigMap; the defaults are in force", "configmap", namespace+"/"+name)
		}
	}()
	// Synced once the handler has loaded what the first list found, not
	// only once the informer's store holds it.
	return func() bool { return reg != nil && reg.HasSynced() }
}

func fromConfigMap(cm *corev1.ConfigMap) (*Config, error) {
	data, ok := cm.Data[ConfigMapKey]
	if !ok {
		if len(cm.Data) != 1 {
			return nil, fmt.Errorf("ConfigMap %s/%s has no key %q", cm.Namespace, cm.Name, ConfigMapKey)
		}
		for _, v := range cm.Data { // a single key of any name, as Capo mounts it
			data = v
		}
	}
	return Parse([]byte(data))
}
