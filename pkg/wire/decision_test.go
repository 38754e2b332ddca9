package wire

import "testing"

func TestRecordedOwner(t *testing.T) {
	var nilDecision *Decision
	for _, d := range []*Decision{nilDecision, {Selected: true}} {
		if _, _, _, ok := d.RecordedOwner(); ok {
			t.Fatalf("%+v: an owner where none was recorded", d)
		}
	}
	d := &Decision{Owner: &Owner{Kind: "StatefulSet", Name: "web", UID: "u1"}}
	if kind, name, uid, ok := d.RecordedOwner(); !ok || kind != "StatefulSet" || name != "web" || uid != "u1" {
		t.Fatalf("got %q %q %q %v", kind, name, uid, ok)
	}
}
