package capoctl

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
)

// output is a command's -o/--output as kubectl has it, on cli-runtime's
// printers: json, yaml, jsonpath=, jsonpath-file=, jsonpath-as-json=,
// go-template=, go-template-file=, and the table capoctl prints itself
// (the default; wide where the command has more columns). The printers
// are cli-runtime's; its genericclioptions.PrintFlags is not used, as that
// package links kustomize (19 MB) for flags capoctl does not have.
type output struct {
	format       string
	allowMissing bool
	wide         bool // the command has a wide table
	printer      printers.ResourcePrinter
}

func addOutput(cmd *cobra.Command, wide bool) *output {
	o := &output{wide: wide}
	cmd.Flags().StringVarP(&o.format, "output", "o", "", "Output format. One of: ("+strings.Join(o.formats(), ", ")+"). The default is a table.")
	cmd.Flags().BoolVar(&o.allowMissing, "allow-missing-template-keys", true, "If true, ignore any errors in templates when a field or map key is missing in the template. Only applies to golang and jsonpath output formats.")
	_ = cmd.RegisterFlagCompletionFunc("output", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		var out []string
		for _, f := range o.formats() {
			if strings.HasPrefix(f, toComplete) {
				out = append(out, f)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	})
	return o
}

func (o *output) formats() []string {
	f := []string{"table"}
	if o.wide {
		f = append(f, "wide")
	}
	return append(f, "json", "yaml", "jsonpath=", "jsonpath-file=", "jsonpath-as-json=", "go-template=", "go-template-file=")
}

// validate builds the printer, so that an unknown format or a template
// that does not parse is refused before anything is dialed.
func (o *output) validate() error {
	kind, arg, _ := strings.Cut(o.format, "=")
	if err := o.build(kind, arg); err != nil {
		return usageError{fmt.Errorf("-o %s: %w", o.format, err)}
	}
	return nil
}

func (o *output) build(kind, arg string) error {
	switch kind {
	case "", "table":
		return nil
	case "wide":
		if o.wide {
			return nil
		}
	case "json":
		o.printer = &printers.JSONPrinter{}
		return nil
	case "yaml":
		o.printer = &printers.YAMLPrinter{}
		return nil
	case "jsonpath", "jsonpath-file", "jsonpath-as-json", "go-template", "go-template-file", "template", "templatefile":
		return o.template(kind, arg)
	}
	return fmt.Errorf("want one of %s", strings.Join(o.formats(), ", "))
}

func (o *output) template(kind, arg string) error {
	if arg == "" {
		return fmt.Errorf("give the template after =, e.g. -o %s='{.items[*].ip}'", kind)
	}
	if strings.HasSuffix(kind, "-file") || kind == "templatefile" {
		b, err := os.ReadFile(arg)
		if err != nil {
			return err
		}
		arg = string(b)
	}
	if strings.HasPrefix(kind, "jsonpath") {
		p, err := printers.NewJSONPathPrinter(arg)
		if err != nil {
			return err
		}
		p.AllowMissingKeys(o.allowMissing)
		p.EnableJSONOutput(kind == "jsonpath-as-json")
		o.printer = p
		return nil
	}
	p, err := printers.NewGoTemplatePrinter([]byte(arg))
	if err != nil {
		return err
	}
	p.AllowMissingKeys(o.allowMissing)
	o.printer = p
	return nil
}

// print writes v through the chosen printer, or calls table for people.
// v is printed as it marshals to JSON: with -o json and -o yaml a list is
// an array, as capoctl always printed it; jsonpath and templates see it
// as kubectl's lists, under .items.
func (o *output) print(w io.Writer, v any, table func(wide bool) error) error {
	if o.printer == nil {
		if err := o.validate(); err != nil {
			return err
		}
	}
	if o.printer == nil {
		return table(o.format == "wide")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, isJSON := o.printer.(*printers.JSONPrinter); !isJSON && len(b) > 0 && b[0] == '[' {
		if _, isYAML := o.printer.(*printers.YAMLPrinter); !isYAML {
			// Templates see a list as kubectl's do: {.items[*].ip}.
			b = append(append([]byte(`{"kind":"List","items":`), b...), '}')
		}
	}
	return o.printer.PrintObj(&runtime.Unknown{Raw: b, ContentType: runtime.ContentTypeJSON}, w)
}
