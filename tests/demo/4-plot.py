# Call 4: plot the aggregate from call 3 and save the chart to a PNG file.
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
by_region.plot.bar(ax=ax, color="steelblue")
ax.set_ylabel("revenue")
ax.set_title("Revenue by region")
fig.tight_layout()
fig.savefig("chart.png")
print("saved chart.png")
