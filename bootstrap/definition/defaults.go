package definition

// Control-plane defaults from the platform's scaling lessons. Each can be
// overridden in a base or a cluster definition.
const (
	DefaultMaxRequestsInflight         = 800
	DefaultMaxMutatingRequestsInflight = 400
	DefaultComponentQPS                = 100
	DefaultComponentBurst              = 200
	// DefaultEtcdQuotaBackendBytes is 8 GiB, etcd's largest supported quota.
	DefaultEtcdQuotaBackendBytes       = 8 << 30
	DefaultEtcdAutoCompactionMode      = "periodic"
	DefaultEtcdAutoCompactionRetention = "5m"
	DefaultMaxSurge                    = "1"
	DefaultMaxUnavailable              = "0"
	DefaultZooKeeperRoot               = "/discovery"
)

// DefaultWatchCacheSizes enlarges the watch cache of the resources that every
// node and controller watches, so reconnecting watchers are served from the
// cache instead of relisting from etcd.
var DefaultWatchCacheSizes = []string{"pods#5000", "nodes#3000", "endpointslices.discovery.k8s.io#5000", "services#1000"}

// SetDefaults fills what a definition leaves out.
func SetDefaults(d *ClusterDefinition) {
	cp := &d.ControlPlane
	if cp.APIServer.MaxRequestsInflight == 0 {
		cp.APIServer.MaxRequestsInflight = DefaultMaxRequestsInflight
	}
	if cp.APIServer.MaxMutatingRequestsInflight == 0 {
		cp.APIServer.MaxMutatingRequestsInflight = DefaultMaxMutatingRequestsInflight
	}
	if cp.APIServer.WatchCacheSizes == nil {
		cp.APIServer.WatchCacheSizes = append([]string(nil), DefaultWatchCacheSizes...)
	}
	for _, c := range []*ClientTuning{&cp.ControllerManager, &cp.Scheduler} {
		if c.QPS == 0 {
			c.QPS = DefaultComponentQPS
		}
		if c.Burst == 0 {
			c.Burst = DefaultComponentBurst
		}
	}
	if cp.Etcd.QuotaBackendBytes == 0 {
		cp.Etcd.QuotaBackendBytes = DefaultEtcdQuotaBackendBytes
	}
	if cp.Etcd.AutoCompactionMode == "" {
		cp.Etcd.AutoCompactionMode = DefaultEtcdAutoCompactionMode
	}
	if cp.Etcd.AutoCompactionRetention == "" {
		cp.Etcd.AutoCompactionRetention = DefaultEtcdAutoCompactionRetention
	}
	if len(cp.Zones) == 0 && len(d.Zones) > 0 {
		cp.Zones = []string{d.Zones[0]}
	}
	for i := range d.InstanceGroups {
		ig := &d.InstanceGroups[i]
		if ig.Role == "" {
			ig.Role = RoleNode
		}
		if ig.Architecture == "" {
			ig.Architecture = ArchAMD64
		}

		if ig.MaxSurge == "" {
			ig.MaxSurge = DefaultMaxSurge
		}
		if ig.MaxUnavailable == "" {
			ig.MaxUnavailable = DefaultMaxUnavailable
		}
	}
	if d.Runtime.ZooKeeper.Root == "" {
		d.Runtime.ZooKeeper.Root = DefaultZooKeeperRoot
	}
}
