package client

import (
	"context"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	"github.com/projectcalico/calico/libcalico-go/lib/watch"

	"github.com/capo-net/capo/pkg/calico/apigroup"
)

// felixConfiguration is read only for programClusterRoutes, where a route
// to a borrowed address comes from; not one of the types whose absence
// stops capo (apigroup.All), but not served it is still an error.
var felixConfiguration = apigroup.Kind{Name: "FelixConfiguration", V1: "felixconfigurations", V3: "felixconfigurations"}

type felixConfigs struct{ v3 *IPAM }

func (f felixConfigs) Get(ctx context.Context, name string, _ options.GetOptions) (*apiv3.FelixConfiguration, error) {
	var out apiv3.FelixConfiguration
	if err := f.v3.get(ctx, felixConfiguration, name, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (felixConfigs) List(context.Context, options.ListOptions) (*apiv3.FelixConfigurationList, error) {
	return nil, refused("listing FelixConfigurations")
}

func (felixConfigs) Create(context.Context, *apiv3.FelixConfiguration, options.SetOptions) (*apiv3.FelixConfiguration, error) {
	return nil, refused("creating a FelixConfiguration")
}

func (felixConfigs) Update(context.Context, *apiv3.FelixConfiguration, options.SetOptions) (*apiv3.FelixConfiguration, error) {
	return nil, refused("updating a FelixConfiguration")
}

func (felixConfigs) Delete(context.Context, string, options.DeleteOptions) (*apiv3.FelixConfiguration, error) {
	return nil, refused("deleting a FelixConfiguration")
}

func (felixConfigs) Watch(context.Context, options.ListOptions) (watch.Interface, error) {
	return nil, refused("watching FelixConfigurations")
}

type clusterInfo struct{ v3 *IPAM }

func (c clusterInfo) Get(ctx context.Context, name string, _ options.GetOptions) (*apiv3.ClusterInformation, error) {
	var out apiv3.ClusterInformation
	if err := c.v3.get(ctx, apigroup.ClusterInformation, name, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (clusterInfo) List(context.Context, options.ListOptions) (*apiv3.ClusterInformationList, error) {
	return nil, refused("listing ClusterInformation")
}

func (clusterInfo) Create(context.Context, *apiv3.ClusterInformation, options.SetOptions) (*apiv3.ClusterInformation, error) {
	return nil, refused("creating ClusterInformation")
}

func (clusterInfo) Update(context.Context, *apiv3.ClusterInformation, options.SetOptions) (*apiv3.ClusterInformation, error) {
	return nil, refused("updating ClusterInformation")
}

func (clusterInfo) Delete(context.Context, string, options.DeleteOptions) (*apiv3.ClusterInformation, error) {
	return nil, refused("deleting ClusterInformation")
}

func (clusterInfo) Watch(context.Context, options.ListOptions) (watch.Interface, error) {
	return nil, refused("watching ClusterInformation")
}
