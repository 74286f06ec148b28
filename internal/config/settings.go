package config

import (
	"reflect"
)

// Decoder is a type that parses its own variable's text: lists, keys,
// accounts, byte sizes. Other fields are strings, booleans, integers and
// durations.
type Decoder interface {
	Decode(value string) error
}

// Setting is one variable, as the tags of its Config field describe it.
type Setting struct {
	Name       string // TOOLSVC_...
	Default    string
	HasDefault bool
	Desc       string
	Brief      string // a few words, for the settings toolsvc -h lists
	Type       reflect.Type
	index      []int // of the field within Config
}

// Section is one part of the configuration: the name toolsvc help takes
// for it, a heading, the text under it and its variables, in the order of
// the fields.
type Section struct {
	Name, Title, Doc string
	Settings         []Setting
}

// Sections lists the configuration's sections and their variables. They
// come from the struct tags, so a field added to a section is parsed,
// listed by toolsvc help and documented without anyone listing it.
func Sections() []Section {
	t := reflect.TypeFor[Config]()
	out := make([]Section, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		sec := Section{Name: sf.Tag.Get("group"), Title: sf.Tag.Get("section"), Doc: sf.Tag.Get("doc")}
		for j := 0; j < sf.Type.NumField(); j++ {
			f := sf.Type.Field(j)
			def, has := f.Tag.Lookup("default")
			sec.Settings = append(sec.Settings, Setting{
				Name:       Prefix + "_" + f.Tag.Get("env"),
				Default:    def,
				HasDefault: has,
				Desc:       f.Tag.Get("desc"),
				Brief:      f.Tag.Get("brief"),
				Type:       f.Type,
				index:      []int{i, j},
			})
		}
		out = append(out, sec)
	}
	return out
}

// settings lists every variable, section after section.
func settings() []Setting {
	var out []Setting
	for _, s := range Sections() {
		out = append(out, s.Settings...)
	}
	return out
}
