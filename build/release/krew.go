package release

import (
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// KrewFile is the krew plugin manifest; in krew-index it goes in as
// plugins/capo.yaml.
const KrewFile = "capo.krew.yaml"

// Releases is where a release's files are downloaded from.
const Releases = "https://github.com/capo-net/capo/releases/download/"

type krewPlugin struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       krewSpec       `json:"spec"`
}

type krewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Caveats          string         `json:"caveats,omitempty"`
	Platforms        []krewPlatform `json:"platforms"`
}

type krewPlatform struct {
	Selector map[string]any `json:"selector"`
	URI      string         `json:"uri"`
	SHA256   string         `json:"sha256"`
	Bin      string         `json:"bin"`
	Files    []krewFile     `json:"files"`
}

type krewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// writeKrew writes the manifest krew installs kubectl-capo from, each
// platform's archive named by its release URL and checksum.
func writeKrew(s Spec, completions bool) error {
	p := krewPlugin{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2",
		Kind:       "Plugin",
		Metadata:   map[string]any{"name": "capo"},
		Spec: krewSpec{
			Version:          s.Version,
			Homepage:         "https://github.com/capo-net/capo",
			ShortDescription: "Show and end capo's IP reservations on Calico",
			Description: "Lists the addresses capo holds for stateful pods on Calico clusters, the addresses\n" +
				"given back to returning pods, ends reservations, and explains whether a pod's\n" +
				"address would be reserved. Needs capo installed in the cluster.\n",
		},
	}
	files := []krewFile{{From: "kubectl-capo", To: "."}, {From: "LICENSE", To: "."}}
	if completions {
		files = append(files, krewFile{From: "completion/*", To: "completion"})
	}
	for _, pl := range CLIPlatforms {
		sum, err := fileSHA256(filepath.Join(s.Out, PluginFile(pl)))
		if err != nil {
			return err
		}
		p.Spec.Platforms = append(p.Spec.Platforms, krewPlatform{
			Selector: map[string]any{"matchLabels": map[string]string{"os": pl.OS, "arch": pl.Arch}},
			URI:      Releases + s.Version + "/" + PluginFile(pl),
			SHA256:   sum,
			Bin:      "kubectl-capo",
			Files:    files,
		})
	}
	if completions {
		p.Spec.Caveats = "Completion scripts are in the plugin's directory, ~/.krew/store/capo/" + s.Version + "/completion:\n" +
			"  source ~/.krew/store/capo/" + s.Version + "/completion/kubectl-capo.bash   # bash; .zsh and .fish likewise\n"
	}
	b, err := yaml.Marshal(p)
	if err != nil {
		return err
	}
	return publish(s.Out, KrewFile, b, 0o644)
}
