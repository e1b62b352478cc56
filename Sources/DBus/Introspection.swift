// org.freedesktop.DBus.Introspectable: the XML description of an exported object.

enum Introspection {
  static let doctype =
    "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\"\n"
    + " \"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n"

  /// The document for one path: its interfaces (user and standard) and its child nodes.
  static func document(object: ExportedObject?, isObjectManager: Bool, children: [String])
    -> String
  {
    var xml = doctype + "<node>\n"
    xml += standardInterfaces
    if object != nil { xml += propertiesInterface }
    if isObjectManager { xml += objectManagerInterface }
    for interface in object?.interfaces ?? [] { append(interface, to: &xml) }
    for child in children { xml += "  <node name=\"\(escape(child))\"/>\n" }
    xml += "</node>\n"
    return xml
  }

  private static func append(_ interface: ExportedInterface, to xml: inout String) {
    xml += "  <interface name=\"\(escape(interface.name.rawValue))\">\n"
    for method in interface.methods {
      xml += "    <method name=\"\(escape(method.name.rawValue))\">\n"
      appendArguments(method.inSignature, names: method.inArgumentNames, direction: "in", to: &xml)
      appendArguments(
        method.outSignature, names: method.outArgumentNames, direction: "out", to: &xml)
      xml += "    </method>\n"
    }
    for signal in interface.signals {
      xml += "    <signal name=\"\(escape(signal.name.rawValue))\">\n"
      appendArguments(signal.signature, names: signal.argumentNames, direction: nil, to: &xml)
      xml += "    </signal>\n"
    }
    for property in interface.properties {
      xml +=
        "    <property name=\"\(escape(property.name))\" type=\"\(escape(property.signature.rawValue))\""
        + " access=\"\(property.access.rawValue)\"/>\n"
    }
    xml += "  </interface>\n"
  }

  private static func appendArguments(
    _ signature: Signature, names: [String], direction: String?, to xml: inout String
  ) {
    for (index, type) in signature.completeTypes.enumerated() {
      let name = index < names.count ? names[index] : "arg\(index)"
      xml += "      <arg name=\"\(escape(name))\" type=\"\(escape(type.rawValue))\""
      if let direction { xml += " direction=\"\(direction)\"" }
      xml += "/>\n"
    }
  }

  /// Escapes text for an XML attribute value.
  static func escape(_ text: String) -> String {
    var out = ""
    out.reserveCapacity(text.utf8.count)
    for character in text {
      switch character {
      case "&": out += "&amp;"
      case "<": out += "&lt;"
      case ">": out += "&gt;"
      case "\"": out += "&quot;"
      case "'": out += "&apos;"
      default: out.append(character)
      }
    }
    return out
  }

  private static let standardInterfaces = """
      <interface name="org.freedesktop.DBus.Introspectable">
        <method name="Introspect">
          <arg name="xml_data" type="s" direction="out"/>
        </method>
      </interface>
      <interface name="org.freedesktop.DBus.Peer">
        <method name="Ping"/>
        <method name="GetMachineId">
          <arg name="machine_uuid" type="s" direction="out"/>
        </method>
      </interface>

    """

  private static let propertiesInterface = """
      <interface name="org.freedesktop.DBus.Properties">
        <method name="Get">
          <arg name="interface_name" type="s" direction="in"/>
          <arg name="property_name" type="s" direction="in"/>
          <arg name="value" type="v" direction="out"/>
        </method>
        <method name="GetAll">
          <arg name="interface_name" type="s" direction="in"/>
          <arg name="properties" type="a{sv}" direction="out"/>
        </method>
        <method name="Set">
          <arg name="interface_name" type="s" direction="in"/>
          <arg name="property_name" type="s" direction="in"/>
          <arg name="value" type="v" direction="in"/>
        </method>
        <signal name="PropertiesChanged">
          <arg name="interface_name" type="s"/>
          <arg name="changed_properties" type="a{sv}"/>
          <arg name="invalidated_properties" type="as"/>
        </signal>
      </interface>

    """

  private static let objectManagerInterface = """
      <interface name="org.freedesktop.DBus.ObjectManager">
        <method name="GetManagedObjects">
          <arg name="objects" type="a{oa{sa{sv}}}" direction="out"/>
        </method>
        <signal name="InterfacesAdded">
          <arg name="object" type="o"/>
          <arg name="interfaces" type="a{sa{sv}}"/>
        </signal>
        <signal name="InterfacesRemoved">
          <arg name="object" type="o"/>
          <arg name="interfaces" type="as"/>
        </signal>
      </interface>

    """
}
