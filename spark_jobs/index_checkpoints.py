# placeholder until the index job lands
