// Placeholder until the ArgumentParsing layer lands.
