"""Values and objects of the IR every layer shares: attributes, shapes, literals, the module, narrowing, opcode sets, memory."""
