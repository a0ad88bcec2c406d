"""Agents: the agent interface and the one registry keyed by game (:mod:`.base`); Yahtzee's random,
greedy, oracle and turn-perfect agents, Yamb's bots, and the agent that plays a network's search."""
